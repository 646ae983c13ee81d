"""Each model's price per token, fitted from the user's own model calls: least squares, exact.

What a call cost is known (its usage record's credits, in nano-credits) and so are its
tokens; the CLI's price list is not. If a model charges a price per token of each type and
nothing per call, a call's credits are

    uncached input x p_input + cache read x p_cache_read + cache write x p_cache_write
        + output x p_output

and the prices that fit the user's calls best (the least sum of squared differences) answer
"what would these tokens have cost on that model", the report's "same work on one model"
(tailer/report/worth.py). Uncached input is the input less the cache reads and writes, which
the CLI counts inside it (docs/REPORT.md says so of every figure).

A fit needs only sums over its calls: the 4x4 matrix of the sums of the products of their
token counts, the sums of each count times the credits, the credits' sum and their sum of
squares (`CallSums`). They are whole numbers, so the parts of a report (each turn keeps its
own, tailer/report/figures.py) add up in any order to the same figures, and the normal
equations are solved exactly: fraction-free Gauss-Jordan elimination over the integers, each
price a ratio of two integers. Prices that are exactly linear come back exactly (floats never
enter the fit), and a singular fit is told apart with certainty (its determinant is 0),
never guessed from a rounding error.

A fit is refused, and says why, rather than guessed:
- `too_few_calls`: fewer than MIN_CALLS_PER_PRICE calls with known credits per price to fit;
- `singular`: the calls cannot tell two prices apart (every call had the same tokens, or
  one type always a fixed multiple of another);
- `ill_conditioned`: they nearly cannot (COND_LIMIT).
A token type no call of the model had is not fitted: its price is None, and work that needs
it cannot be priced on that model. A call of unknown credits is left out and counted.

Its error: the residual standard error of one call (the spread of the calls' credits around
the fitted prices, in credits), beside the standard error of each price, and of any estimate
made with them. 0 when the calls follow the prices exactly.
"""

from __future__ import annotations

import math

from ..records import record

TOKEN_TYPES = ("input", "cache_read", "cache_write", "output")  # input: uncached
PRICES = len(TOKEN_TYPES)
# The upper triangle of the 4x4 matrix of sums of products, row by row: (i, j) for i <= j.
_PAIRS = tuple((i, j) for i in range(PRICES) for j in range(i, PRICES))
# CallSums: calls of known credits, calls of unknown credits, the credits' sum (nano), the
# sums of products of token counts (_PAIRS), of each count times the credits, and the sum of
# the credits' squares: 18 whole numbers.
_PRODUCTS = 3
_CREDITS_BY = _PRODUCTS + len(_PAIRS)
_SQUARES = _CREDITS_BY + PRICES
SUMS = _SQUARES + 1
MIN_CALLS_PER_PRICE = 3
# The condition number of the normal equations (their columns scaled to a unit diagonal)
# beyond which a fit is refused: the calls' token types then agree to within 1 part in
# 100,000, so a change in the credits as small as the CLI's rounding to whole nano-credits
# could move a price by more than 0.01%.
COND_LIMIT = 1e10
FITTED, TOO_FEW_CALLS, SINGULAR, ILL_CONDITIONED = (
    "fitted", "too_few_calls", "singular", "ill_conditioned")


def token_counts(usage) -> tuple[int, int, int, int]:
    """The counts the prices apply to, in TOKEN_TYPES' order, from a call's or a leg's Usage:
    its input uncached (Usage.uncached_input), as every other figure of the report counts
    input, so that a fitted input price is per token of the input column shown beside it."""
    return (usage.uncached_input(), usage.cache_read_tokens, usage.cache_write_tokens,
            usage.output_tokens)


def call_sums(counts: tuple[int, int, int, int], nano_aiu: int | None) -> list[int]:
    """The CallSums of one call: its token counts (token_counts) and credits (None: unknown).
    Written out in CallSums' order (_PAIRS row by row, then _CREDITS_BY, then _SQUARES): a
    month has some 200,000 calls, and the loops over _PAIRS took a fifth of a turn's row."""
    if nano_aiu is None:
        return [0, 1] + [0] * (SUMS - 2)
    a, b, c, d = counts
    return [1, 0, nano_aiu, a * a, a * b, a * c, a * d, b * b, b * c, b * d, c * c, c * d, d * d,
            a * nano_aiu, b * nano_aiu, c * nano_aiu, d * nano_aiu, nano_aiu * nano_aiu]


def added(parts) -> list[int]:
    """CallSums added up."""
    return [sum(column) for column in zip(*parts)] or [0] * SUMS


@record(slots=True)
class ModelPrices:
    """A model's fitted prices, as the report shows them (credits per token, by type)."""

    model: str
    calls: int  # with known credits: those fitted
    unknown_credit_calls: int  # left out of the fit
    fit: str  # FITTED, TOO_FEW_CALLS, SINGULAR, ILL_CONDITIONED
    prices: dict[str, float | None] | None  # None: not fitted; a type's None: no call had it
    price_errors: dict[str, float | None] | None  # the standard error of each price
    error: float | None  # the residual standard error of one call, in credits
    relative_error: float | None  # that error over the mean credits of a call


class Fit:
    """The solved prices of one model, exact: `figures` for the report, `estimate` to price
    tokens with them."""

    def __init__(self, model: str, sums: list[int]):
        self.model, self.sums = model, sums
        self.calls, self.unknown = sums[0], sums[1]
        matrix = _matrix(sums)
        # The types some call had; a type none had would make the matrix singular.
        self.types = [i for i in range(PRICES) if matrix[i][i]]
        self.unseen = tuple(i for i in range(PRICES) if not matrix[i][i])
        self.status, self.solved = self._solve(matrix)

    @property
    def fitted(self) -> bool:
        return self.status == FITTED

    def _solve(self, matrix: list[list[int]]) -> tuple[str, tuple | None]:
        types = self.types
        if not types or self.calls < MIN_CALLS_PER_PRICE * len(types) or self.calls <= len(types):
            return TOO_FEW_CALLS, None
        sub = [[matrix[i][j] for j in types] for i in types]
        moments = [self.sums[_CREDITS_BY + i] for i in types]
        solved = _gauss_jordan(sub, [moments] + [[int(i == j) for i in range(len(types))]
                                                 for j in range(len(types))])
        if solved is None:
            return SINGULAR, None
        determinant, columns = solved
        numerators, inverse = columns[0], columns[1:]  # inverse[j][i]: determinant x A^-1[i][j]
        if _condition(sub, inverse, determinant) > COND_LIMIT:
            return ILL_CONDITIONED, None
        # The residual sum of squares, times the determinant: exact.
        residual = self.sums[_SQUARES] * determinant - sum(n * m for n, m in zip(numerators, moments))
        return FITTED, (determinant, numerators, inverse, residual)

    def covers(self, counts) -> bool:
        """Whether these token counts can be priced: fitted, and no count of a type no call had."""
        return self.fitted and not any(counts[i] for i in self.unseen)

    def estimate(self, counts) -> tuple[float, float]:
        """What tokens (the sums of token_counts, all covered) cost at the fitted prices, and
        the standard error of that figure, both in nano-credits. The figure is exact but for
        one division (a whole number where the prices are, as the log's credits are); its
        error is s^2 . c' (A^-1) c in floats, as only an error needs."""
        determinant, numerators, inverse, _ = self.solved
        picked = [counts[i] for i in self.types]
        nano = sum(n * c for n, c in zip(numerators, picked)) / determinant
        if not self._variance:
            return nano, 0.0
        spread = sum(a * b * inverse[i][j] for i, a in enumerate(picked) for j, b in enumerate(picked))
        return nano, math.sqrt(max(spread * self._variance / determinant, 0.0))

    @property
    def _variance(self) -> float:
        """s^2: the residual variance of one call (nano-credits squared), 0 when exact."""
        determinant, _, _, residual = self.solved
        return residual / determinant / (self.calls - len(self.types)) if residual else 0.0

    def figures(self) -> ModelPrices:
        if not self.fitted:
            return ModelPrices(self.model, self.calls, self.unknown, self.status, None, None,
                               None, None)
        determinant, numerators, inverse, _ = self.solved
        variance = self._variance
        prices, errors = dict.fromkeys(TOKEN_TYPES), dict.fromkeys(TOKEN_TYPES)
        for at, i in enumerate(self.types):
            prices[TOKEN_TYPES[i]] = numerators[at] / determinant / 1e9
            errors[TOKEN_TYPES[i]] = math.sqrt(max(variance * inverse[at][at] / determinant, 0.0)) / 1e9
        error = math.sqrt(variance) / 1e9
        mean = self.sums[2] / self.calls / 1e9
        return ModelPrices(self.model, self.calls, self.unknown, FITTED, prices, errors, error,
                           error / mean if mean else None)


def _matrix(sums: list[int]) -> list[list[int]]:
    matrix = [[0] * PRICES for _ in range(PRICES)]
    for index, (i, j) in enumerate(_PAIRS, _PRODUCTS):
        matrix[i][j] = matrix[j][i] = sums[index]
    return matrix


def _gauss_jordan(matrix: list[list[int]], columns: list[list[int]]) -> tuple[int, list[list[int]]] | None:
    """Solve matrix . x = column for each of `columns` over the integers: (d, [d . x for
    each column]), where d is the determinant (up to its sign); None when the matrix is
    singular. Fraction-free (Bareiss's division by the previous pivot is exact), so no
    rounding and no fractions module (whose import costs every report's start-up)."""
    size = len(matrix)
    rows = [list(matrix[i]) + [column[i] for column in columns] for i in range(size)]
    previous = 1
    for k in range(size):
        pivot_at = next((i for i in range(k, size) if rows[i][k]), None)
        if pivot_at is None:
            return None
        rows[k], rows[pivot_at] = rows[pivot_at], rows[k]
        pivot = rows[k][k]
        for i in range(size):
            if i != k:
                factor = rows[i][k]
                rows[i] = [(pivot * a - factor * b) // previous for a, b in zip(rows[i], rows[k])]
        previous = pivot
    return previous, [[rows[i][size + c] for i in range(size)] for c in range(len(columns))]


def _condition(matrix: list[list[int]], inverse: list[list[int]], determinant: int) -> float:
    """The 1-norm condition number of the matrix with its rows and columns scaled to a unit
    diagonal (the scaling that makes token types of any size comparable)."""
    scale = [math.sqrt(matrix[i][i]) for i in range(len(matrix))]
    size = len(matrix)
    norm = max(sum(abs(matrix[i][j]) / (scale[i] * scale[j]) for i in range(size)) for j in range(size))
    norm_inverse = max(sum(abs(inverse[j][i] / determinant) * scale[i] * scale[j] for i in range(size))
                       for j in range(size))
    return norm * norm_inverse
