"""Integrations with other frameworks, in upstream's layout
(``vineyard.contrib.dask``). Each imports its framework only when used."""
