import math
import re

import numpy as np
import pytest

from tfsnippet.utils import check_positive_int, check_positive_number


@pytest.mark.parametrize('value, expected', [(1, 1), (np.int64(7), 7)])
def test_positive_int_accepted(value, expected):
    out = check_positive_int(value, 'n')
    assert out == expected and type(out) is int


@pytest.mark.parametrize('value, error', [
    (0, ValueError), (-3, ValueError), (True, TypeError), (2.0, TypeError), ('2', TypeError),
    (None, TypeError)])
def test_positive_int_refused(value, error):
    with pytest.raises(error, match=re.escape(f'`n` must be a positive int, got {value!r}')):
        check_positive_int(value, 'n')


def test_positive_int_none_allowed():
    assert check_positive_int(None, 'n', allow_none=True) is None
    with pytest.raises(ValueError, match=re.escape('`n` must be a positive int or None, got 0')):
        check_positive_int(0, 'n', allow_none=True)


@pytest.mark.parametrize('value, error', [
    (0., ValueError), (-1, ValueError), (math.nan, ValueError), (False, TypeError),
    ('1', TypeError)])
def test_positive_number_refused(value, error):
    with pytest.raises(error, match=re.escape(f'`s` must be a positive number, got {value!r}')):
        check_positive_number(value, 's')


def test_positive_number_accepted_as_float():
    assert check_positive_number(2, 's') == 2. and type(check_positive_number(2, 's')) is float
    assert check_positive_number(None, 's', allow_none=True) is None
