"""Options that several commands share are defined once (`psyattrs.cli._options`): the same
name, default and help wherever they appear."""

from __future__ import annotations

import argparse

from psyattrs.cli import build_parser


def _commands(parser: argparse.ArgumentParser, name: str = "psyattrs"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _commands(sub, f"{name} {sub_name}")


def _option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    return next((a for a in parser._actions if flag in a.option_strings), None)


def test_schema_is_one_option_wherever_it_appears():
    found = {name: _option(p, "--schema") for name, p in _commands(build_parser())}
    found = {name: a for name, a in found.items() if a is not None}
    assert set(found) >= {"psyattrs data validate", "psyattrs data stats", "psyattrs data align",
                          "psyattrs data show-aligned", "psyattrs labels resolve"}
    assert {(a.default, a.help) for a in found.values()} == {(None, "label schema: 'opela' (default) or a YAML file")}


def test_input_format_is_one_option_wherever_it_appears():
    found = {name: _option(p, "--format") for name, p in _commands(build_parser())}
    inputs = {name: a for name, a in found.items() if a is not None and name != "psyattrs data synth"}
    assert set(inputs) == {"psyattrs data validate", "psyattrs data stats", "psyattrs labels resolve",
                           "psyattrs labels quality", "psyattrs labels next", "psyattrs predict",
                           "psyattrs annotate"}
    for name, action in inputs.items():  # detection unless forced, worded the same way
        assert action.default is None and action.help.startswith("force the input format"), name
        assert "instead of detecting it" in action.help, name
    assert "(one of annotated," in inputs["psyattrs data validate"].help
    assert inputs["psyattrs annotate"].choices == ("personaldialog", "table", "lewidi")
    assert found["psyattrs data synth"].default == "annotated"  # an output layout: another option
