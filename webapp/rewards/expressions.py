"""The expression reward term's evaluator: arithmetic over an episode's scalar attributes.

Two layers, never Python `eval`:
1. `expression_check` parses the text with `ast` and walks it against a whitelist (numbers,
   names, arithmetic, comparisons, `and`/`or`/`not`, `a if c else b`, and calls of `min`,
   `max`, `abs`, `round`, `clip`). Anything else is refused with what was found and the
   column where it starts: attribute access, subscripts, dunder names, strings,
   comprehensions, lambdas, calls outside the whitelist, keyword arguments, constant
   exponents above MAX_EXPONENT, oversized text or trees. A recipe is checked when it is
   saved and when a run config is validated, so a refused expression never reaches a worker.
2. `expression_evaluate` runs the checked text with simpleeval, its names bound to floats
   only and its operators and functions replaced by the bounded ones below. Evaluation
   time is bounded by construction: no loops, at most MAX_NODES nodes, float arithmetic
   with exponents capped at MAX_EXPONENT.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Container, Mapping
from functools import lru_cache
from typing import Any

MAX_CHARS = 500
MAX_NODES = 200
MAX_EXPONENT = 64
MAX_CONSTANT = 1e12
MAX_ARGS = 8


class ExpressionError(ValueError):
    """An expression was refused; the message says what and where (1-based column)."""


class ExpressionUnscored(ArithmeticError):
    """This episode cannot be scored by the expression (a name it lacks, 1/0, overflow)."""


def _clip(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


def _round(value: float, digits: float = 0) -> float:
    return float(round(value, int(_clip(digits, 0, 12))))


def _power(base: float, exponent: float) -> float:
    if abs(exponent) > MAX_EXPONENT:
        raise ExpressionUnscored(f"exponent {exponent:g} is above {MAX_EXPONENT}")
    try:
        result = float(base) ** float(exponent)
    except (OverflowError, ZeroDivisionError) as exc:
        raise ExpressionUnscored(str(exc)) from None
    if isinstance(result, complex):
        raise ExpressionUnscored("a negative number to a fractional power")
    return result


def _divide(a: float, b: float) -> float:
    if b == 0:
        raise ExpressionUnscored("division by zero")
    return float(a) / float(b)


def _floor_divide(a: float, b: float) -> float:
    if b == 0:
        raise ExpressionUnscored("division by zero")
    return float(a) // float(b)


def _modulo(a: float, b: float) -> float:
    if b == 0:
        raise ExpressionUnscored("modulo by zero")
    return float(a) % float(b)


FUNCTIONS: dict[str, Callable[..., float]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "round": _round,
    "clip": _clip,
}
_ARITY = {
    "min": (1, MAX_ARGS),
    "max": (1, MAX_ARGS),
    "abs": (1, 1),
    "round": (1, 2),
    "clip": (3, 3),
}

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: _divide,
    ast.FloorDiv: _floor_divide,
    ast.Mod: _modulo,
    ast.Pow: _power,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
OPERATORS: dict[type, Callable[..., Any]] = {**_BINARY, **_UNARY, **_COMPARE}

_SYMBOLS = {
    ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
    ast.MatMult: "@", ast.Invert: "~", ast.In: "in", ast.NotIn: "not in", ast.Is: "is",
    ast.IsNot: "is not",
}  # fmt: skip
_DESCRIBED = {
    ast.Attribute: "attribute access ('.')",
    ast.Subscript: "subscripts ('[...]')",
    ast.Lambda: "lambda",
    ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.GeneratorExp: "comprehensions",
    ast.List: "lists",
    ast.Tuple: "tuples",
    ast.Set: "sets",
    ast.Dict: "dicts",
    ast.JoinedStr: "strings",
    ast.NamedExpr: "assignment (':=')",
    ast.Starred: "'*' unpacking",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.Slice: "slices",
}


def _where(node: ast.AST) -> str:
    return f"at column {getattr(node, 'col_offset', 0) + 1}"


def _refuse(node: ast.AST, what: str) -> ExpressionError:
    return ExpressionError(f"{what} {_where(node)} is not allowed")


def _check_operator(node: ast.BinOp | ast.UnaryOp, allowed: Container[type[ast.AST]]) -> None:
    """Refuse `node` unless its operator's type is among `allowed`."""
    if type(node.op) not in allowed:
        raise _refuse(node, f"the operator '{_SYMBOLS.get(type(node.op), type(node.op).__name__)}'")


def _check_node(node: ast.AST) -> None:
    # Operator nodes are checked with the expression that holds them.
    if isinstance(
        node, ast.Expression | ast.Load | ast.operator | ast.unaryop | ast.cmpop | ast.boolop
    ):
        return
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("_"):
            raise _refuse(node, f"the attribute '{node.attr[:40]}' (attribute access, '.')")
        raise _refuse(node, "attribute access ('.')")
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _refuse(node, f"the constant {value!r}"[:80])
        if not math.isfinite(float(value)) or abs(value) > MAX_CONSTANT:
            raise ExpressionError(
                f"the number {value!r:.40} {_where(node)} is larger than {MAX_CONSTANT:g}"
            )
        return
    if isinstance(node, ast.Name):
        if node.id.startswith("_"):
            raise ExpressionError(
                f"the name '{node.id}' {_where(node)} is not allowed: names starting with '_'"
            )
        return
    if isinstance(node, ast.BinOp):
        _check_operator(node, _BINARY)
        if isinstance(node.op, ast.Pow):
            exponent = node.right
            if isinstance(exponent, ast.UnaryOp) and isinstance(exponent.operand, ast.Constant):
                exponent = exponent.operand
            if isinstance(exponent, ast.Constant) and isinstance(exponent.value, int | float):
                if abs(exponent.value) > MAX_EXPONENT:
                    raise ExpressionError(
                        f"the exponent {exponent.value!r:.40} {_where(exponent)} is above {MAX_EXPONENT}"
                    )
        return
    if isinstance(node, ast.UnaryOp):
        _check_operator(node, _UNARY)
        return
    if isinstance(node, ast.Compare):
        for op in node.ops:
            if type(op) not in _COMPARE:
                raise _refuse(node, f"the comparison '{_SYMBOLS.get(type(op), type(op).__name__)}'")
        return
    if isinstance(node, ast.BoolOp | ast.IfExp):
        return
    if isinstance(node, ast.Call):
        func = node.func
        if not isinstance(func, ast.Name):
            what = (
                "a method call" if isinstance(func, ast.Attribute) else "a call of a computed value"
            )
            raise _refuse(node, what)
        if func.id not in FUNCTIONS:
            raise ExpressionError(
                f"the function '{func.id}' {_where(node)} is not allowed; use {', '.join(sorted(FUNCTIONS))}"
            )
        if node.keywords:
            raise _refuse(node.keywords[0].value, f"a keyword argument to {func.id}()")
        low, high = _ARITY[func.id]
        if not low <= len(node.args) <= high:
            count = f"{low}" if low == high else f"{low} to {high}"
            raise ExpressionError(
                f"{func.id}() {_where(node)} takes {count} arguments, not {len(node.args)}"
            )
        return
    what = _DESCRIBED.get(type(node), f"'{type(node).__name__}'")
    raise _refuse(node, what)


@lru_cache(maxsize=256)
def expression_check(text: str) -> frozenset[str]:
    """Refuse `text` (ExpressionError) unless it is a whitelisted expression; return the
    names it reads. Nothing in it runs."""
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError("the expression is empty")
    if len(text) > MAX_CHARS:
        raise ExpressionError(f"the expression has {len(text)} characters; at most {MAX_CHARS}")
    if "\n" in text or "\r" in text:
        raise ExpressionError("the expression must be one line")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        column = f" at column {exc.offset}" if exc.offset else ""
        raise ExpressionError(f"not a valid expression{column}: {exc.msg}") from None
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_NODES:
        raise ExpressionError(f"the expression has {len(nodes)} parts; at most {MAX_NODES}")
    for node in nodes:
        _check_node(node)
    called = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
    return frozenset(n.id for n in nodes if isinstance(n, ast.Name) and id(n) not in called)


def expression_evaluate(text: str, names: Mapping[str, float]) -> float:
    """The value of a checked expression over `names` (floats only). Raises ExpressionError
    for a refused expression and ExpressionUnscored when this episode cannot be scored."""
    from simpleeval import InvalidExpression, SimpleEval

    needed = expression_check(text)
    missing = sorted(name for name in needed if name not in names)
    if missing:
        raise ExpressionUnscored(f"the episode has no attribute {', '.join(missing)}")
    bound = {name: float(names[name]) for name in needed}
    evaluator = SimpleEval(operators=OPERATORS, functions=dict(FUNCTIONS), names=bound)
    try:
        value = evaluator.eval(text.strip())
    except ExpressionUnscored:
        raise
    except (ArithmeticError, ValueError, TypeError) as exc:
        raise ExpressionUnscored(str(exc)) from None
    except InvalidExpression as exc:  # the check above refuses these first
        raise ExpressionError(str(exc)) from None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if not isinstance(value, int | float) or not math.isfinite(float(value)):
        raise ExpressionUnscored(f"the expression gave {value!r:.40}, not a finite number")
    return float(value)
