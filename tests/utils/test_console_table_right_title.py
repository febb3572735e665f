"""A title with a right-hand part keeps one space between its parts at least,
as the classic ConsoleTable did (its test ``test_long_title``), whatever the
space between columns."""

from tfsnippet.utils import ConsoleTable


def test_a_long_left_title_is_one_space_from_the_right_title():
    t = ConsoleTable(2)                       # col_space 3
    t.add_title('x' * 40, 'y' * 10)
    t.add_row(['a', 'b'])
    assert str(t) == ('x' * 40 + ' ' + 'y' * 10 + '\n'
                      'a' + ' ' * 49 + 'b')


def test_a_right_title_over_wider_rows_is_flush_with_the_table():
    t = ConsoleTable(2, col_space=2)
    t.add_title('Left', 'Right')
    t.add_row(['alpha', 12345])
    assert str(t) == 'Left   Right\nalpha  12345'
