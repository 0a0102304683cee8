"""Dask and xarray on top of the public API."""
