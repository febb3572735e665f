import argparse
import dataclasses
import json
import re
import sys
from typing import Literal

import pytest

from tfsnippet.experiment import (Config, ConfigField, config_from_dict, config_to_dict,
                                  get_config_defaults, load_config_file, parse_config,
                                  register_config_arguments)


class Optim(Config):
    """Optimizer settings.

    This second paragraph stays out of --help.
    """
    name = ConfigField(str, default='adam', choices=['adam', 'sgd'],
                       description='Which optimizer.')
    lr = ConfigField(float, default=1e-3, description='Learning rate, 100% of it.')


class Train(Config):
    """A training run."""
    max_epoch = 10
    l2 = ConfigField(float, nullable=True, description='L2 weight.')
    hidden = [64, 32]
    shuffle = True
    tag = 'run'
    optim = Optim


TRAIN_DEFAULTS = {'max_epoch': 10, 'l2': None, 'hidden': [64, 32], 'shuffle': True,
                  'tag': 'run', 'optim': {'name': 'adam', 'lr': 0.001}}


@dataclasses.dataclass
class Data:
    """Where the data comes from."""
    path: str
    batch_size: int = 32
    mode: Literal['fast', 'slow'] = dataclasses.field(
        default='fast', metadata={'description': 'Loader mode.'})
    optim: Optim = dataclasses.field(default_factory=lambda: Optim(lr=0.5))


@dataclasses.dataclass
class Eval:
    every: int = 1
    metrics: list[str] = dataclasses.field(default_factory=lambda: ['loss'])


class Run(Config):
    seed = 0
    eval = Eval


def run_parser():
    return argparse.ArgumentParser(prog='run', allow_abbrev=False)


def cli_error(capsys, config, argv):
    """The error line `parse_config` prints before exiting with code 2."""
    with pytest.raises(SystemExit) as info:
        parse_config(config, argv, parser=run_parser())
    assert info.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def write_json(tmp_path, data, name='run.json'):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


# ------------------------------------------------------------------- Config
def test_defaults_with_types_read_off_the_values():
    config = Train()
    assert config.to_dict() == TRAIN_DEFAULTS
    assert get_config_defaults(Train) == get_config_defaults(config) == TRAIN_DEFAULTS
    assert isinstance(config.optim, Optim)


def test_constructor_values_override_defaults():
    config = Train(max_epoch=3, optim={'lr': 0.5})
    assert (config.max_epoch, config.optim.name, config.optim.lr) == (3, 'adam', 0.5)
    assert Train(optim=Optim(name='sgd')).optim.name == 'sgd'


def test_int_assigned_to_float_field_is_stored_as_float():
    config = Train()
    config.optim.lr = 1
    assert config.optim.lr == 1.0 and type(config.optim.lr) is float


@pytest.mark.parametrize('name, value, message', [
    ('max_epoch', 'ten', "`max_epoch` must be an int, got 'ten'"),
    ('max_epoch', True, '`max_epoch` must be an int, got True'),
    ('max_epoch', 2.0, '`max_epoch` must be an int, got 2.0'),
    ('shuffle', 1, '`shuffle` must be a bool, got 1'),
    ('tag', None, '`tag` must be a str, got None'),
    ('hidden', 5, '`hidden` must be a list of ints, got 5'),
    ('hidden', [1, 'b'], "`hidden[1]` must be an int, got 'b'"),
    ('l2', 'x', "`l2` must be a float or None, got 'x'"),
])
def test_assignment_of_wrong_type_is_refused(name, value, message):
    config = Train()
    with pytest.raises(TypeError, match=f'^{re.escape(message)}$'):
        setattr(config, name, value)
    assert config.to_dict() == TRAIN_DEFAULTS


def test_error_names_a_field_of_a_section_by_its_path():
    config = Train()
    with pytest.raises(TypeError, match=re.escape("`optim.lr` must be a float, got 'fast'")):
        config.optim.lr = 'fast'
    config.optim = Optim()   # a replaced section learns its path too
    with pytest.raises(TypeError, match=re.escape("`optim.lr` must be a float, got 'fast'")):
        config.optim.lr = 'fast'


def test_choice_outside_choices_is_refused():
    config = Train()
    with pytest.raises(ValueError, match=re.escape(
            "`optim.name` must be one of 'adam', 'sgd', got 'rmsprop'")):
        config.optim.name = 'rmsprop'
    config.optim.name = 'sgd'
    assert config.optim.name == 'sgd'


def test_nullable_field_takes_none_and_its_type():
    config = Train(l2=1e-4)
    assert config.l2 == 1e-4
    config.l2 = None
    assert config.l2 is None


def test_list_field_takes_tuples_as_lists():
    config = Train(hidden=(8, 4))
    assert config.hidden == [8, 4] and type(config.hidden) is list


def test_unknown_field_is_refused_with_the_closest_name():
    config = Train()
    with pytest.raises(AttributeError, match=re.escape(
            'Train has no field `max_epochs` (did you mean `max_epoch`?)')):
        config.max_epochs = 3
    with pytest.raises(TypeError, match=re.escape(
            'Train() has no field `max_epoc` (did you mean `max_epoch`?)')):
        Train(max_epoc=3)


def test_field_cannot_be_deleted():
    config = Train()
    with pytest.raises(AttributeError, match=re.escape(
            '`optim.lr` is a config field and cannot be deleted; assign a value to it instead')):
        del config.optim.lr
    assert config.optim.lr == 0.001


def test_section_takes_a_mapping_over_its_defaults():
    config = Train()
    config.optim = {'name': 'sgd'}
    assert config.optim == Optim(name='sgd', lr=0.001)


@pytest.mark.parametrize('value, error, message', [
    (3, TypeError, '`optim` must be an instance of Optim or a mapping, got 3'),
    ({'lrr': 1.0}, ValueError, 'Optim has no field `optim.lrr` (did you mean `optim.lr`?)'),
    ({'lr': 'x'}, TypeError, "`optim.lr` must be a float, got 'x'"),
])
def test_section_refuses_bad_values(value, error, message):
    config = Train()
    with pytest.raises(error, match=f'^{re.escape(message)}$'):
        config.optim = value
    assert config.optim == Optim()


def test_instances_do_not_share_lists():
    first = Train()
    first.hidden.append(16)
    assert Train().hidden == [64, 32]
    saved = first.to_dict()
    saved['hidden'].append(8)
    assert first.hidden == [64, 32, 16]


def test_equality_and_repr():
    assert Train() == Train()
    assert Train(max_epoch=3) != Train()
    assert Optim() != Data(path='x').optim   # different lr default
    assert repr(Optim()) == "Optim(name='adam', lr=0.001)"
    assert repr(Train(optim=Optim(name='sgd'))) == (
        "Train(max_epoch=10, l2=None, hidden=[64, 32], shuffle=True, tag='run', "
        "optim=Optim(name='sgd', lr=0.001))")


def test_subclass_inherits_fields_and_checks_new_defaults():
    class LongTrain(Train):
        max_epoch = 100
        patience = 5

    assert LongTrain().to_dict() == {**TRAIN_DEFAULTS, 'max_epoch': 100, 'patience': 5}
    with pytest.raises(TypeError, match=re.escape("`Bad.max_epoch` must be an int, got 'x'")):
        class Bad(Train):
            max_epoch = 'x'


def test_annotations_give_types_and_methods_are_not_fields():
    class Annotated(Config):
        lr: float = 1
        ratio: float | None = None
        mode: Literal['a', 'b'] = 'a'

        @property
        def doubled(self):
            return self.lr * 2

        def describe(self):
            return f'lr={self.lr}'

    config = Annotated()
    assert config.to_dict() == {'lr': 1.0, 'ratio': None, 'mode': 'a'}
    assert type(config.lr) is float and config.doubled == 2.0
    with pytest.raises(ValueError, match=re.escape("`mode` must be one of 'a', 'b', got 'c'")):
        config.mode = 'c'


def test_config_field_properties():
    field = Optim.__dict__['name']
    assert (field.type, field.default_value, field.description, field.nullable,
            field.choices) == (str, 'adam', 'Which optimizer.', False, ('adam', 'sgd'))
    assert ConfigField(int | None).nullable is True
    assert ConfigField(list[int], default=(1,)).default_value == [1]


@pytest.mark.parametrize('make, error, message', [
    (lambda: ConfigField(float), ValueError,
     '`default` is None, but `nullable` is False: give a default value or pass `nullable=True`'),
    (lambda: ConfigField(str, default='elu', choices=['relu', 'tanh']), ValueError,
     "`default` must be one of 'relu', 'tanh', got 'elu'"),
    (lambda: ConfigField(int, default=1, choices=['a']), TypeError,
     "every item of `choices` must be an int, got 'a'"),
    (lambda: ConfigField(int, default=1, choices=[]), ValueError,
     '`choices` must not be empty, got an empty list'),
    (lambda: ConfigField(dict, default={}), TypeError,
     "`type` must be bool, int, float, str, list[X] of one of those, Literal[...], "
     "Optional[X] / X | None of those, or a nested config class, got <class 'dict'>"),
    (lambda: ConfigField(int, default=1, description=2), TypeError,
     '`description` must be a str or None, got 2'),
])
def test_config_field_refuses_bad_declarations(make, error, message):
    with pytest.raises(error, match=f'^{re.escape(message)}$'):
        make()


@pytest.mark.parametrize('body, message', [
    ({'x': None}, 'cannot infer the type of `Bad.x` from its default None: declare it as '
                  'ConfigField(<type>, nullable=True)'),
    ({'x': []}, 'cannot infer the item type of `Bad.x` from []: declare it as '
                'ConfigField(list[int], default=...) or similar'),
    ({'x': {}}, '`Bad.x` must default to a bool, int, float, str or a list of one of those, '
                'got {}'),
    ({'to_dict': 1}, '`Bad.to_dict` cannot be a field: `to_dict` is a method of Config; '
                     'rename the field'),
    ({'data': Data}, 'section `Bad.data` needs a default for every field, but Data has none '
                     'for `path`'),
])
def test_config_class_refuses_bad_fields(body, message):
    with pytest.raises(TypeError, match=f'^{re.escape(message)}$'):
        type('Bad', (Config,), body)


# --------------------------------------------------------------- dataclasses
def test_dataclass_configs_and_sections():
    data = config_from_dict(Data, {'path': 'x'}, strict=False)
    assert data == Data(path='x', batch_size=32, mode='fast', optim=Optim(lr=0.5))
    assert config_to_dict(data) == {'path': 'x', 'batch_size': 32, 'mode': 'fast',
                                    'optim': {'name': 'adam', 'lr': 0.5}}
    assert get_config_defaults(Data) == {'batch_size': 32, 'mode': 'fast',
                                         'optim': {'name': 'adam', 'lr': 0.5}}
    run = Run()
    assert run.eval == Eval() and run.to_dict() == {'seed': 0,
                                                    'eval': {'every': 1, 'metrics': ['loss']}}


@pytest.mark.parametrize('values, error, message', [
    ({'path': 1}, TypeError, '`path` must be a str, got 1'),
    ({'path': 'x', 'mode': 'medium'}, ValueError,
     "`mode` must be one of 'fast', 'slow', got 'medium'"),
    ({}, ValueError, '`data` has no value for `path` of Data, which has no default'),
])
def test_dataclass_values_are_validated(values, error, message):
    with pytest.raises(error, match=f'^{re.escape(message)}$'):
        config_from_dict(Data, values, strict=False)


# ------------------------------------------------------------ dict round trip
def test_from_dict_round_trip():
    config = Train(max_epoch=3, hidden=[1], optim=Optim(name='sgd'))
    assert Train.from_dict(config.to_dict()) == config
    assert config_from_dict(Train, json.loads(json.dumps(config_to_dict(config)))) == config


def test_saved_config_that_no_longer_matches_the_class_names_the_keys():
    saved = Train().to_dict()
    del saved['l2']
    saved['optim']['nme'] = 'sgd'
    saved['momentum'] = 0.9
    message = ('`data` does not match Train: unknown keys `optim.nme` (did you mean '
               '`optim.name`?), `momentum`; missing key `l2`. Pass `strict=False` to drop '
               'unknown keys and use defaults for missing ones.')
    with pytest.raises(ValueError, match=f'^{re.escape(message)}$'):
        config_from_dict(Train, saved)
    assert config_from_dict(Train, saved, strict=False) == Train()


@pytest.mark.parametrize('cls, data, message', [
    (Train, [1], '`data` must be a mapping of field names to values, got [1]'),
    (Train, {'optim': 3}, '`optim` must be a mapping of field names to values, got 3'),
    (dict, {}, "`cls` must be a Config subclass or a dataclass, got <class 'dict'>"),
])
def test_from_dict_refuses_wrong_shapes(cls, data, message):
    with pytest.raises(TypeError, match=f'^{re.escape(message)}$'):
        config_from_dict(cls, data)


def test_to_dict_refuses_non_configs():
    with pytest.raises(TypeError, match=re.escape(
            "`config` must be a Config or dataclass instance, got {'a': 1}")):
        config_to_dict({'a': 1})


# ------------------------------------------------------------ config files
def test_load_config_file_reads_json(tmp_path):
    assert load_config_file(write_json(tmp_path, {'a': {'b': [1]}})) == {'a': {'b': [1]}}


@pytest.mark.parametrize('name, text, error, message', [
    ('run.txt', '{}', ValueError, "`path` must name a .json, .yaml or .yml file, got '{path}'"),
    ('run.json', '[1, 2]', TypeError,
     "config file '{path}' must hold a mapping of field names to values, got [1, 2]"),
    ('run.json', '{', ValueError, "config file '{path}' is not valid JSON: Expecting property "
                                  "name enclosed in double quotes: line 1 column 2 (char 1)"),
])
def test_load_config_file_refuses_bad_files(tmp_path, name, text, error, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(error, match=f'^{re.escape(message.format(path=path))}$'):
        load_config_file(path)


def test_yaml_without_pyyaml_asks_for_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, 'yaml', None)   # makes `import yaml` fail
    path = tmp_path / 'run.yaml'
    path.write_text('max_epoch: 3\n')
    with pytest.raises(RuntimeError, match=re.escape(
            f"reading '{path}' needs PyYAML, which is not installed: run `pip install pyyaml`, "
            'or use a .json file')):
        load_config_file(path)


def test_yaml_file_is_a_layer(tmp_path):
    pytest.importorskip('yaml')
    path = tmp_path / 'run.yml'
    path.write_text('max_epoch: 3\noptim:\n  name: sgd\n')
    config = parse_config(Train, ['--config', str(path)])
    assert (config.max_epoch, config.optim.name) == (3, 'sgd')
    (tmp_path / 'empty.yaml').write_text('')
    assert load_config_file(tmp_path / 'empty.yaml') == {}


# ------------------------------------------------------ register_config_arguments
def test_registered_options_update_the_config():
    config = Train()
    parser = argparse.ArgumentParser()
    register_config_arguments(config, parser)
    args = parser.parse_args(['--max_epoch', '5', '--optim.lr=0.1', '--l2', '1e-4',
                              '--tag', 'x y', '--optim.name', 'sgd'])
    assert config.to_dict() == {**TRAIN_DEFAULTS, 'max_epoch': 5, 'l2': 1e-4, 'tag': 'x y',
                                'optim': {'name': 'sgd', 'lr': 0.1}}
    assert (args.max_epoch, getattr(args, 'optim.lr')) == (5, 0.1)
    assert not hasattr(args, 'shuffle')   # options not given stay out of the namespace


@pytest.mark.parametrize('argv, expected', [
    (['--shuffle', 'true'], True), (['--shuffle', 'False'], False), (['--shuffle', '1'], True),
    (['--shuffle', '0'], False), (['--shuffle', 'yes'], True), (['--shuffle', 'NO'], False),
    (['--shuffle', 'on'], True), (['--shuffle', 'off'], False), (['--shuffle'], True),
])
def test_bool_options(argv, expected):
    config = Train(shuffle=not expected)
    parser = argparse.ArgumentParser()
    register_config_arguments(config, parser)
    parser.parse_args(argv)
    assert config.shuffle is expected


@pytest.mark.parametrize('text, expected', [
    ('1,2,3', [1, 2, 3]), (' 7 ', [7]), ('[4, 5]', [4, 5]), ('[]', []), ('', []),
])
def test_list_options_take_commas_or_json(text, expected):
    config = parse_config(Train, ['--hidden', text])
    assert config.hidden == expected


def test_list_option_of_strings():
    assert parse_config(Run, ['--eval.metrics', 'loss, acc']).eval.metrics == ['loss', 'acc']


@pytest.mark.parametrize('word', ['none', 'NULL'])
def test_none_for_nullable_option(word):
    assert parse_config(Train(l2=0.1), ['--l2', word]).l2 is None


def test_prefix_goes_in_front_of_every_option():
    config = Train()
    parser = argparse.ArgumentParser()
    register_config_arguments(config, parser, prefix='model')
    args = parser.parse_args(['--model.max_epoch', '3', '--model.optim.lr', '0.5'])
    assert (config.max_epoch, config.optim.lr) == (3, 0.5)
    assert getattr(args, 'model.max_epoch') == 3


@pytest.mark.parametrize('kwargs, error, message', [
    ({'prefix': 3}, TypeError, '`prefix` must be a str or None, got 3'),
    ({'prefix': '-m'}, ValueError,
     "`prefix` must be dotted names such as \"model\" or \"exp.model\", got '-m'"),
    ({'file_option': 'config'}, ValueError,
     "`file_option` must be a long option such as \"--config\", got 'config'"),
])
def test_register_refuses_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=f'^{re.escape(message)}$'):
        register_config_arguments(Train(), argparse.ArgumentParser(), **kwargs)


def test_register_refuses_a_class():
    message = (f'`config` must be a Config or dataclass instance, got {Train!r}; pass an '
               'instance, or use parse_config() for a class')
    with pytest.raises(TypeError, match=f'^{re.escape(message)}$'):
        register_config_arguments(Train, argparse.ArgumentParser())


def test_register_with_file_option(tmp_path):
    config = Train()
    parser = argparse.ArgumentParser()
    register_config_arguments(config, parser, file_option='--cfg')
    args = parser.parse_args(['--max_epoch', '7', '--cfg', write_json(
        tmp_path, {'max_epoch': 3, 'tag': 'file'})])
    assert (config.max_epoch, config.tag) == (7, 'file')
    assert args.cfg == [str(tmp_path / 'run.json')]


# ------------------------------------------------------------- parse_config
@pytest.mark.parametrize('argv', [
    ['--optim.lr', '0.01', '--config', '{a}'],
    ['--config', '{a}', '--optim.lr', '0.01'],
])
def test_command_line_wins_over_file_in_any_order(tmp_path, argv):
    a = write_json(tmp_path, {'max_epoch': 3, 'optim': {'lr': 0.5}})
    config = parse_config(Train, [arg.format(a=a) for arg in argv])
    assert config.to_dict() == {**TRAIN_DEFAULTS, 'max_epoch': 3,
                                'optim': {'name': 'adam', 'lr': 0.01}}


def test_later_file_wins_over_earlier_file(tmp_path):
    a = write_json(tmp_path, {'max_epoch': 3, 'tag': 'a'}, 'a.json')
    b = write_json(tmp_path, {'max_epoch': 4}, 'b.json')
    config = parse_config(Train, ('--config', a, '--config', b))
    assert (config.max_epoch, config.tag) == (4, 'a')


def test_parse_config_updates_an_instance_only_on_success(capsys):
    config = Train(max_epoch=7, tag='mine')
    assert parse_config(config, ['--l2', '0.5']) is config
    assert (config.max_epoch, config.tag, config.l2) == (7, 'mine', 0.5)
    cli_error(capsys, config, ['--max_epoch', '3', '--tag', 'x', '--l2', 'bad'])
    assert (config.max_epoch, config.tag, config.l2) == (7, 'mine', 0.5)


def test_parse_config_fills_a_dataclass(tmp_path, capsys):
    assert parse_config(Data, ['--path', 'd', '--optim.name', 'sgd']) == Data(
        path='d', optim=Optim(name='sgd', lr=0.5))
    assert parse_config(Data, ['--config', write_json(tmp_path, {'path': 'f'})]).path == 'f'
    assert cli_error(capsys, Data, ['--batch_size', '8']) == (
        'run: error: no value for --path: give it on the command line or in a --config file')


def test_parse_config_refuses_bad_arguments():
    with pytest.raises(TypeError, match=re.escape(
            '`config_or_class` must be a Config subclass, a dataclass, or an instance of one, '
            'got 3')):
        parse_config(3, [])
    with pytest.raises(TypeError, match=re.escape(
            '`parser` must be an argparse.ArgumentParser or None, got 3')):
        parse_config(Train, [], parser=3)


def test_field_named_like_the_file_option_is_refused():
    class Clash(Config):
        config = 'x'

    with pytest.raises(ValueError, match=re.escape(
            'field `config` of Clash clashes with the config-file option --config: rename the '
            'field, or call register_config_arguments() with another `file_option`')):
        parse_config(Clash, [])
    config = Clash()
    parser = argparse.ArgumentParser()
    register_config_arguments(config, parser, file_option='--config-file')
    parser.parse_args(['--config', 'y'])
    assert config.config == 'y'


def help_text(capsys, config, monkeypatch):
    monkeypatch.setenv('COLUMNS', '200')
    with pytest.raises(SystemExit) as info:
        parse_config(config, ['--help'])
    assert info.value.code == 0
    return ' '.join(capsys.readouterr().out.split())   # line breaks do not matter


def test_help_lists_types_defaults_and_descriptions(capsys, monkeypatch):
    text = help_text(capsys, Train, monkeypatch)
    for piece in [
        'A training run.',
        '--max_epoch INT (int; default: 10)',
        '--l2 FLOAT L2 weight. (float or None; default: None)',
        '--hidden INT,... (list[int]; default: [64, 32])',
        '--shuffle [BOOL] (bool; default: True)',
        "--tag STR (str; default: 'run')",
        '--config FILE Read config values from a .json file',
        'optim: Optimizer settings. --optim.name',
        "--optim.name {adam,sgd} Which optimizer. (str; default: 'adam')",
        '--optim.lr FLOAT Learning rate, 100% of it. (float; default: 0.001)',
    ]:
        assert piece in text
    assert 'second paragraph' not in text


def test_help_shows_current_values_and_required_fields(capsys, monkeypatch):
    assert '--max_epoch INT (int; default: 5)' in help_text(capsys, Train(max_epoch=5),
                                                            monkeypatch)
    text = help_text(capsys, Data, monkeypatch)
    assert '--path STR (str; required)' in text
    assert "--mode {fast,slow} Loader mode. (str; default: 'fast')" in text
    assert '--optim.lr FLOAT Learning rate, 100% of it. (float; default: 0.5)' in text
    # a dataclass without a docstring has none shown (not the one dataclass generates)
    assert 'eval: --eval.every INT (int; default: 1)' in help_text(capsys, Run, monkeypatch)


# ----------------------------------------------------- bad command-line input
@pytest.mark.parametrize('argv, message', [
    (['--max_epochs', '3'], 'unrecognized option: `--max_epochs` (did you mean `--max_epoch`?)'),
    (['--optim.lrr=0.1'], 'unrecognized option: `--optim.lrr` (did you mean `--optim.lr`?)'),
    (['--lrr', '-1', '--zzz'],
     'unrecognized options: `--lrr` (did you mean `--l2`?), `--zzz`'),
    (['extra'], 'unrecognized arguments: extra'),
    # the field of that name in a section; an abbreviation in the same section
    (['--lr', '0.1'], 'unrecognized option: `--lr` (did you mean `--optim.lr`?)'),
    (['--optim.learning_rate', '0.1'],
     'unrecognized option: `--optim.learning_rate` (did you mean `--optim.lr`?)'),
])
def test_unknown_option_suggests_the_closest_field(capsys, argv, message):
    assert cli_error(capsys, Train, argv) == f'run: error: {message}'


@pytest.mark.parametrize('argv, message', [
    (['--max_epoch', 'ten'], "argument --max_epoch: expected an int, got 'ten'"),
    (['--max_epoch', 'none'], "argument --max_epoch: expected an int, got 'none'"),
    (['--l2', 'x'], "argument --l2: expected a float or None, got 'x'"),
    (['--shuffle', 'maybe'], "argument --shuffle: expected a bool, got 'maybe'"),
    (['--hidden', '1,x'],
     "argument --hidden: expected a list of ints, got '1,x' ('x' is not an int)"),
    (['--hidden', '[1, "x"]'],
     "argument --hidden: expected a list of ints, got '[1, \"x\"]' ('x' is not an int)"),
    (['--hidden', '[1,'],
     "argument --hidden: expected a list of ints, got '[1,' (not valid JSON: Expecting value)"),
])
def test_option_value_of_wrong_type(capsys, argv, message):
    assert cli_error(capsys, Train, argv) == f'run: error: {message}'


def test_option_value_outside_choices(capsys):
    assert cli_error(capsys, Train, ['--optim.name', 'rmsprop']) == (
        "run: error: argument --optim.name: expected one of 'adam', 'sgd', got 'rmsprop'")


@pytest.mark.parametrize('data, message', [
    ({'optim': {'nme': 'sgd'}}, '{path}: Train has no field `optim.nme` '
                                '(did you mean `optim.name`?)'),
    ({'optim': {'learning_rate': 0.1}}, '{path}: Train has no field `optim.learning_rate` '
                                        '(did you mean `optim.lr`?)'),
    ({'max_epoch': 'x'}, "{path}: `max_epoch` must be an int, got 'x'"),
    ({'optim': {'name': 'rmsprop'}},
     "{path}: `optim.name` must be one of 'adam', 'sgd', got 'rmsprop'"),
    ({'optim': 3}, '{path}: `optim` must be a mapping of field names to values, got 3'),
    ([1, 2], "config file '{path}' must hold a mapping of field names to values, got [1, 2]"),
])
def test_config_file_of_wrong_shape(capsys, tmp_path, data, message):
    path = write_json(tmp_path, data)
    assert cli_error(capsys, Train, ['--config', path]) == (
        f'run: error: argument --config: {message.format(path=path)}')


def test_missing_config_file(capsys, tmp_path):
    path = tmp_path / 'nope.json'
    assert cli_error(capsys, Train, ['--config', str(path)]) == (
        f"run: error: argument --config: [Errno 2] No such file or directory: '{path}'")
