"""The CLI's verbs: every subcommand its parser offers has its handler in one table, and none else."""

import pytest

from remotegpu.__main__ import VERBS, main, parser


def test_every_verb_the_parser_offers_has_a_handler():
    offered = set(parser()._subparsers._group_actions[0].choices)
    assert offered == set(VERBS)


def test_a_verb_with_bad_arguments_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as refused:
        main(["teardown", "box", "reboot", "--reason", "x"])
    assert refused.value.code == 2
    assert "invalid choice: 'reboot'" in capsys.readouterr().err
