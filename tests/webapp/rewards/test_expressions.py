"""The expression term's evaluator: refused expressions name what and where, and never run."""

from __future__ import annotations

from pathlib import Path

import pytest
import simpleeval

from webapp.rewards.expressions import (
    MAX_CHARS,
    ExpressionError,
    ExpressionUnscored,
    expression_check,
    expression_evaluate,
)
from webapp.runs.config import RunConfigError, parse_run_config

REFUSED = [
    (
        "__import__('os')",
        "the function '__import__' at column 1 is not allowed; use abs, clip, max, min, round",
    ),
    ("__import__('os').system('id')", "a method call at column 1 is not allowed"),
    (
        "won.__class__",
        "the attribute '__class__' (attribute access, '.') at column 1 is not allowed",
    ),
    ("__builtins__", "the name '__builtins__' at column 1 is not allowed: names starting with '_'"),
    ("reward.real.imag", "attribute access ('.') at column 1 is not allowed"),
    (
        "open('/etc/passwd')",
        "the function 'open' at column 1 is not allowed; use abs, clip, max, min, round",
    ),
    (
        "1 + eval('2')",
        "the function 'eval' at column 5 is not allowed; use abs, clip, max, min, round",
    ),
    ("2 ** 100000", "the exponent 100000 at column 6 is above 64"),
    ("reward ** -1000", "the exponent 1000 at column 12 is above 64"),
    ("[x for x in range(10)]", "comprehensions at column 1 is not allowed"),
    ("reward[0]", "subscripts ('[...]') at column 1 is not allowed"),
    ("(lambda: 1)()", "a call of a computed value at column 1 is not allowed"),
    ("'a' * 10", "the constant 'a' at column 1 is not allowed"),
    ("max(reward, key=abs)", "a keyword argument to max() at column 17 is not allowed"),
    ("reward if reward in (1, 2) else 0", "the comparison 'in' at column 11 is not allowed"),
    ("reward << 40", "the operator '<<' at column 1 is not allowed"),
    ("x := 1", "not a valid expression at column 3: invalid syntax"),
    ("1" * (MAX_CHARS + 1), f"the expression has {MAX_CHARS + 1} characters; at most {MAX_CHARS}"),
    ("+".join(["a"] * 120), "the expression has 479 parts; at most 200"),
    ("", "the expression is empty"),
    ("1e300", "the number 1e+300 at column 1 is larger than 1e+12"),
]


@pytest.mark.parametrize(("text", "message"), REFUSED)
def test_refused_with_what_and_where_and_nothing_runs(text, message, monkeypatch, tmp_path):
    ran: list[str] = []
    monkeypatch.setattr(simpleeval.SimpleEval, "eval", lambda self, expr, *a, **k: ran.append(expr))
    with pytest.raises(ExpressionError) as refused:
        expression_check(text)
    assert str(refused.value) == message
    with pytest.raises(ExpressionError):
        expression_evaluate(text, {"reward": 1.0, "won": 1.0})
    assert ran == []  # simpleeval was never asked to evaluate it


def test_a_side_effect_never_happens(tmp_path: Path):
    target = tmp_path / "pwned"
    with pytest.raises(ExpressionError):
        expression_evaluate(f"__import__('os').system('touch {target}')", {})
    assert not target.exists()


def test_names_are_scalars_and_runtime_limits_leave_the_episode_unscored():
    assert expression_check("min(reward, 1) + 0.5 * (1 - num_guesses / 6) if won else -abs(x)") == {
        "reward", "num_guesses", "won", "x",
    }  # fmt: skip
    assert expression_evaluate(
        "1 + 0.5 * (1 - num_guesses / 6) if won else 0", {"won": 1.0, "num_guesses": 1.0}
    ) == (pytest.approx(1 + 0.5 * 5 / 6))
    assert expression_evaluate(
        "clip(x, 0, 1) + round(y, 1) + (x > 2)", {"x": 3.0, "y": 0.26}
    ) == pytest.approx(2.3)
    for text, names, why in [
        ("x ** y", {"x": 10.0, "y": 100.0}, "exponent 100 is above 64"),
        ("(x ** 60) ** 60", {"x": 10.0}, "Numerical result out of range"),
        ("1 / x", {"x": 0.0}, "division by zero"),
        ("x + missing", {"x": 1.0}, "the episode has no attribute missing"),
        ("(-x) ** 0.5", {"x": 1.0}, "a negative number to a fractional power"),
    ]:
        with pytest.raises(ExpressionUnscored) as unscored:
            expression_evaluate(text, names)
        assert why in str(unscored.value)


def test_a_run_config_refuses_an_unsafe_expression_naming_the_field():
    config = {
        "name": "r",
        "model": "demo:echo",
        "environments": [{"environment": 1}],
        "rewards": [
            {"name": "f", "kind": "expression", "params": {"expression": "().__class__.__bases__"}}
        ],
    }
    with pytest.raises(RunConfigError) as refused:
        parse_run_config(config)
    assert refused.value.errors == {
        "rewards.0.params.expression": [
            "expression: the attribute '__bases__' (attribute access, '.') at column 1 is not allowed"
        ]
    }
