"""README.rst's "Installing" section names every package the ``test`` extra of
pyproject.toml installs."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_names_each_package_of_the_test_extra():
    extras = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project'][
        'optional-dependencies']
    names = [re.split(r'[<>=!~ ;]', spec, maxsplit=1)[0] for spec in extras['test']]
    readme = (ROOT / 'README.rst').read_text()
    section = readme.split('\nInstalling\n', 1)[1].split('\nUsage\n', 1)[0]
    paragraph = section.split('The ``test`` extra installs', 1)[1].split('\n\n', 1)[0]
    assert [name for name in names if f'``{name}``' not in paragraph] == []
    # and the extras it holds are theirs
    held = re.findall(r'``(\w+)``', paragraph.split('holds the', 1)[1].split('(not', 1)[0])
    for extra in held:
        assert set(extras[extra]) <= set(extras['test']), extra
