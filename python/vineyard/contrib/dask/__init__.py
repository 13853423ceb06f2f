"""Dask on vineyard (upstream's ``vineyard.contrib.dask``); the functions
live in :mod:`vineyard.contrib.dask.dask`, as upstream's, and are re-exported
here. Importing this package does not import dask."""

from __future__ import annotations

from .dask import (
    bind_workers,
    dask_array_builder,
    dask_array_resolver,
    dask_context,
    dask_dataframe_builder,
    dask_dataframe_resolver,
    register_dask_types,
    worker_instances,
)

__all__ = [
    "bind_workers", "dask_array_builder", "dask_array_resolver", "dask_context", "dask_dataframe_builder",
    "dask_dataframe_resolver", "register_dask_types", "worker_instances",
]
