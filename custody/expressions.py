"""A project's own metric, without code: an arithmetic expression over results.parquet's columns,
reduced to one number. Pure.

The expression is parsed, never executed: only numbers, column names, + - * / ** %, comparisons
(true counts as 1) and a few numpy functions pass; anything else (attributes, subscripts, other
calls, lambdas) is refused when the metric is registered and again when it is evaluated.
"""

import ast
import math

import numpy as np

FUNCTIONS = {
    "abs": np.abs,
    "sqrt": np.sqrt,
    "log": np.log,
    "log10": np.log10,
    "exp": np.exp,
    "square": np.square,
    "minimum": np.minimum,
    "maximum": np.maximum,
}
REDUCERS = {
    "mean": lambda values: float(np.mean(values)),
    "median": lambda values: float(np.median(values)),
    "sum": lambda values: float(np.sum(values)),
    "min": lambda values: float(np.min(values)),
    "max": lambda values: float(np.max(values)),
    "rms": lambda values: math.sqrt(float(np.mean(np.square(values)))),
}
LIMIT = 300
OPERATORS = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
    ast.Div: np.divide,
    ast.Pow: np.power,
    ast.Mod: np.mod,
}
COMPARISONS = {
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
}


def parse(expression: str) -> ast.Expression:
    """The checked tree of expression; ValueError saying what is not allowed."""
    if not isinstance(expression, str) or not expression.strip() or len(expression) > LIMIT:
        raise ValueError(f"an expression of 1 to {LIMIT} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an expression: {exc.msg}") from None
    for node in ast.walk(tree):
        _check(node)
    return tree


def _check(node) -> None:
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Call, ast.Name, ast.Constant, ast.Load)
    if isinstance(node, ast.operator | ast.cmpop | ast.unaryop):
        if type(node) not in OPERATORS and type(node) not in COMPARISONS and not isinstance(node, ast.USub | ast.UAdd):
            raise ValueError(f"the operator {type(node).__name__} is not allowed")
        return
    if not isinstance(node, allowed):
        raise ValueError(f"{type(node).__name__} is not allowed (columns, numbers, arithmetic, comparisons)")
    if isinstance(node, ast.Constant) and (isinstance(node.value, bool) or not isinstance(node.value, int | float)):
        raise ValueError("only numbers may be written as constants")
    if isinstance(node, ast.Compare) and len(node.ops) != 1:
        raise ValueError("one comparison at a time")
    known = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS
    if isinstance(node, ast.Call) and (not known or node.keywords):
        raise ValueError(f"functions allowed: {', '.join(sorted(FUNCTIONS))}")


def columns_of(expression: str) -> set[str]:
    tree = parse(expression)
    called = {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call)}
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)} - called


def evaluate(expression: str, columns: dict, reducer: str) -> float:
    """The expression over the columns, reduced; KeyError for a column the results lack."""
    tree = parse(expression)
    if reducer not in REDUCERS:
        raise ValueError(f"reducers: {', '.join(REDUCERS)}")
    with np.errstate(all="ignore"):
        values = np.asarray(_value(tree.body, columns), dtype=float)
    return REDUCERS[reducer](values)


def _value(node, columns: dict):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in columns:
            raise KeyError(node.id)
        return np.asarray(columns[node.id], dtype=float)
    if isinstance(node, ast.UnaryOp):
        operand = _value(node.operand, columns)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp):
        return OPERATORS[type(node.op)](_value(node.left, columns), _value(node.right, columns))
    if isinstance(node, ast.Compare):
        compare = COMPARISONS[type(node.ops[0])]
        return compare(_value(node.left, columns), _value(node.comparators[0], columns)).astype(float)
    return FUNCTIONS[node.func.id](*(_value(arg, columns) for arg in node.args))
