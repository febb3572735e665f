"""examples/README.rst is well-formed reStructuredText (issue 22: a half-replaced table)."""

from pathlib import Path

import docutils.core
import docutils.utils

README = Path(__file__).resolve().parents[1] / 'examples' / 'README.rst'


def test_examples_readme_parses_without_warnings_and_lists_each_script_once():
    text = README.read_text(encoding='utf-8')
    # any docutils warning (a broken table, a stray transition) raises SystemMessage
    doctree = docutils.core.publish_doctree(
        text, source_path=str(README),
        settings_overrides={'halt_level': docutils.utils.Reporter.WARNING_LEVEL,
                            'report_level': docutils.utils.Reporter.SEVERE_LEVEL})
    tables = list(doctree.findall(lambda node: node.tagname == 'table'))
    scripts = sorted(p.name for p in README.parent.glob('*.py'))
    first_cells = [row.children[0].astext() for row in tables[0].findall()
                   if row.tagname == 'row']
    assert first_cells == ['digits_eager.py', 'digits_graph.py', 'digits_trainer.py',
                           'digits_resume.py', 'digits_distributed.py', 'digits_sweep.py',
                           'digits_search.py', 'multitask_digits.py', '_digits.py']
    assert sorted(first_cells) == scripts
