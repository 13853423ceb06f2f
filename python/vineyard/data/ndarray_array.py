"""``NDArrayArray``: upstream's pandas extension array whose elements are
the rows of a NumPy array of two or more dimensions, so that such an array
can be one column of a DataFrame (``pd.DataFrame({"x": NDArrayArray(a)})``).

Imported from :mod:`vineyard.data.dataframe` on first use (it imports
pandas). A frame with such a column is put like any other: the column is
pickled (its NumPy buffer out of band, a blob) and comes back as an
NDArrayArray.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.extensions import ExtensionArray, ExtensionDtype, register_extension_dtype, take

__all__ = ["NDArrayArray", "NDArrayDtype"]


@register_extension_dtype
class NDArrayDtype(ExtensionDtype):
    """The dtype of an :class:`NDArrayArray`: each element a NumPy array."""

    name = "ndarray"
    type = np.ndarray
    kind = "O"
    na_value = None

    @classmethod
    def construct_array_type(cls) -> type[NDArrayArray]:  # type: ignore[valid-type]
        return NDArrayArray


class NDArrayArray(ExtensionArray):
    """A column of rows of ``values`` (a NumPy array, at least 1-D): element
    ``i`` is ``values[i]``."""

    def __init__(self, values: Any) -> None:
        arr = np.asarray(values)
        if arr.ndim == 0:
            raise ValueError("vineyard: NDArrayArray needs an array of at least one dimension")
        self._ndarray = arr

    @property
    def values(self) -> np.ndarray:
        return self._ndarray

    @classmethod
    def _from_sequence(cls, scalars: Sequence[Any], *, dtype: Any = None, copy: bool = False) -> NDArrayArray:
        return cls(np.array([np.asarray(s) for s in scalars]) if len(scalars) else np.empty((0,)))

    @classmethod
    def _from_factorized(cls, values: Any, original: NDArrayArray) -> NDArrayArray:
        return cls(values)

    @classmethod
    def _concat_same_type(cls, to_concat: Sequence[NDArrayArray]) -> NDArrayArray:
        return cls(np.concatenate([a._ndarray for a in to_concat]))

    @property
    def dtype(self) -> NDArrayDtype:
        return NDArrayDtype()

    @property
    def shape(self) -> tuple[int]:
        return (len(self._ndarray),)

    @property
    def nbytes(self) -> int:
        return int(self._ndarray.nbytes)

    def __len__(self) -> int:
        return len(self._ndarray)

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, (int, np.integer)):
            return self._ndarray[item]
        item = pd.api.indexers.check_array_indexer(self, item)
        return NDArrayArray(self._ndarray[item])

    def __eq__(self, other: object) -> Any:  # type: ignore[override]
        if isinstance(other, NDArrayArray):
            other = other._ndarray
        eq = self._ndarray == other
        return eq.reshape(len(self), -1).all(axis=1) if eq.ndim > 1 else eq

    def isna(self) -> np.ndarray:
        return np.zeros(len(self), dtype=bool)

    def take(self, indices: Sequence[int], *, allow_fill: bool = False, fill_value: Any = None) -> NDArrayArray:
        if allow_fill:
            rows = take(np.arange(len(self)), indices, allow_fill=True, fill_value=-1)
            if (rows < 0).any():
                raise ValueError("vineyard: NDArrayArray has no missing value to fill with")
            return NDArrayArray(self._ndarray[rows])
        return NDArrayArray(self._ndarray.take(indices, axis=0))

    def copy(self) -> NDArrayArray:
        return NDArrayArray(self._ndarray.copy())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = np.empty(len(self), dtype=object)
        for i in range(len(self)):
            out[i] = self._ndarray[i]
        return out
