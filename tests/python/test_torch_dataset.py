"""vineyard.torch datasets under DataLoader(num_workers=2) with every start
method: fork (the workers inherit the parent's client and views; gets in
them go through libv6d's reader for forked children), spawn and forkserver
(the dataset pickles by socket and id, each worker connects). Every batch is
checked against the value stored. Skipped without torch."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")

import vineyard.torch as vt

pytestmark = [pytest.mark.timeout(300), pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

METHODS = ["fork", "spawn", "forkserver"]
ROWS, BATCH = 50, 7


def batches(dataset, method):
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=2, shuffle=False,
                                         multiprocessing_context=method)
    return list(loader)


def expected_batches(n):
    return [(i, min(i + BATCH, n)) for i in range(0, n, BATCH)]


@pytest.mark.parametrize("method", METHODS)
def test_tensor(client, method):
    value = np.random.default_rng(3).standard_normal((ROWS, 4, 3)).astype(np.float32)
    ds = vt.Dataset(client, client.put(value))
    assert len(ds) == ROWS
    first = ds[0]
    assert first.data_ptr() == client.get(ds.object_id)[0].ctypes.data  # an item is the store's memory
    got = batches(ds, method)
    assert len(got) == len(expected_batches(ROWS))
    for batch, (lo, hi) in zip(got, expected_batches(ROWS)):
        np.testing.assert_array_equal(batch.numpy(), value[lo:hi])


@pytest.mark.parametrize("method", METHODS)
def test_dataframe(client, method):
    df = pd.DataFrame({"x": np.arange(ROWS, dtype=np.float64) / 3, "label": np.arange(ROWS) % 5,
                       "w": np.linspace(0, 1, ROWS).astype(np.float32)})
    ds = vt.Dataset(client, client.put(df), columns=["x", "label"])
    got = batches(ds, method)
    assert len(got) == len(expected_batches(ROWS))
    for batch, (lo, hi) in zip(got, expected_batches(ROWS)):
        assert set(batch) == {"x", "label"}
        np.testing.assert_array_equal(batch["x"].numpy(), df["x"].to_numpy()[lo:hi])
        np.testing.assert_array_equal(batch["label"].numpy(), df["label"].to_numpy()[lo:hi])


@pytest.mark.parametrize("method", METHODS)
def test_arrow_table(client, method):
    table = pa.table({"a": pa.array(np.arange(ROWS, dtype=np.int64) * 2), "b": pa.array(np.ones(ROWS) / 7)})
    ds = vt.Dataset(client, client.put(table))
    got = batches(ds, method)
    assert len(got) == len(expected_batches(ROWS))
    for batch, (lo, hi) in zip(got, expected_batches(ROWS)):
        np.testing.assert_array_equal(batch["a"].numpy(), table.column("a").to_numpy()[lo:hi])
        np.testing.assert_array_equal(batch["b"].numpy(), table.column("b").to_numpy()[lo:hi])


@pytest.mark.parametrize("method", METHODS)
def test_objects_got_in_the_workers(client, method):
    # Each item is its own object, got in the worker: under fork through the
    # parent's client (libv6d's reader for forked children, no Go).
    values = [np.full((3, 2), i, dtype=np.int32) for i in range(ROWS)]
    ds = vt.ObjectDataset(client, [client.put(v) for v in values])
    got = batches(ds, method)
    assert len(got) == len(expected_batches(ROWS))
    for batch, (lo, hi) in zip(got, expected_batches(ROWS)):
        np.testing.assert_array_equal(batch.numpy(), np.stack(values[lo:hi]))


def test_bad_values_are_refused(client):
    with pytest.raises(TypeError, match="ObjectDataset"):
        vt.Dataset(client, client.put({"not": "rows"}))
    ds = vt.Dataset(client, client.put(np.arange(5)))
    with pytest.raises(IndexError):
        ds[5]
