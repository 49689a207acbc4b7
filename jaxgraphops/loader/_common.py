"""What both loaders share: the background thread that prepares batches ahead, the epoch's order and keys, the
progress bar and the argument checks."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

import jax
import numpy as np

_ITEM, _END, _ERROR = range(3)
_POLL_S = 0.05  # how often a blocked producer looks whether the consumer has gone


def prefetched(batches: Iterator, size: int) -> Iterator:
    """The items of ``batches``, produced by a background thread at most ``size`` items ahead (``size=0``: in the
    caller's thread, no thread).

    The thread stops cleanly in every case: at the end (it returns after its last item), when the producer
    raises (the exception is re-raised in the consumer, at the position of the failed item), and when the
    consumer stops early, raises or drops the iterator (closing the generator stops and joins the thread, and
    the prepared items are released).
    """
    if size == 0:
        yield from batches
        return
    stop, items = threading.Event(), queue.Queue(size)

    def put(entry) -> bool:
        while not stop.is_set():
            try:
                items.put(entry, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def produce():
        try:
            for item in batches:
                if not put((_ITEM, item)):
                    return
            put((_END, None))
        except BaseException as e:  # noqa: BLE001 (handed to the consumer, which re-raises it)
            put((_ERROR, e))

    thread = threading.Thread(target=produce, name="jaxgraphops-loader", daemon=True)
    thread.start()
    try:
        while True:
            kind, item = items.get()
            if kind == _END:
                return
            if kind == _ERROR:
                raise item
            yield item
            item = None  # the consumer holds the batch, not this frame
    finally:
        stop.set()
        while thread.is_alive():  # unblock a producer waiting on a full queue, drop what it prepared
            try:
                items.get(timeout=_POLL_S)
            except queue.Empty:
                pass
        thread.join()


def with_progress(fn: str, batches: Iterator, progress, total: int, epoch: int) -> Iterator:
    """``batches`` under a tqdm bar (``progress``: False, True, or the bar's description)."""
    if progress is False or progress is None:
        return batches
    try:
        from tqdm.auto import tqdm
    except ImportError:
        raise ImportError(f"{fn}: progress needs tqdm (pip install tqdm), or pass progress=False") from None
    desc = progress if isinstance(progress, str) else f"epoch {epoch + 1}"
    return iter(tqdm(batches, total=total, desc=desc, leave=False))


def batch_slices(n: int, batch_size: int, drop_last: bool) -> list[slice]:
    """The batches' slices of an epoch of ``n`` items (the last one short unless ``drop_last``)."""
    stop = n - n % batch_size if drop_last else n
    return [slice(s, min(s + batch_size, n)) for s in range(0, stop, batch_size)]


def check_key(fn: str, key, shuffle: bool, required: bool):
    """``key`` as a new-style JAX key (raw ``uint32[2]`` keys wrapped), or an error naming what needs it."""
    if key is None:
        if required or shuffle:
            why = "to sample" if required else "with shuffle=True"
            raise ValueError(f"{fn}: key must be a JAX PRNG key {why} (e.g. key=jax.random.key(0))")
        return None
    if isinstance(key, jax.Array | np.ndarray) and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape != ():
            raise ValueError(f"{fn}: key must be a single PRNG key; got an array of keys of shape {key.shape}")
        return key
    raw = np.asarray(key) if isinstance(key, jax.Array | np.ndarray) else None
    if raw is None or raw.dtype != np.uint32 or raw.shape != (2,):
        raise TypeError(f"{fn}: key must be a JAX PRNG key (jax.random.key) or a raw uint32[2] key "
                        f"(jax.random.PRNGKey); got {type(key).__name__}")
    return jax.random.wrap_key_data(raw)


def check_positive(fn: str, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{fn}: {name} must be a positive int; got {value!r}")
    return int(value)


def check_prefetch(fn: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ValueError(f"{fn}: prefetch must be a non-negative int (batches prepared ahead; 0: no thread); "
                         f"got {value!r}")
    return int(value)


def check_rows(fn: str, name: str, tree, n: int, what: str):
    """Every leaf of ``tree`` as an array with ``n`` rows (one per ``what``), or a ValueError naming the leaf."""
    def check(path, leaf):
        shape = np.shape(leaf)
        if not shape or shape[0] != n:
            where = jax.tree_util.keystr(path)
            raise ValueError(f"{fn}: {name}{where} must have one row per {what}, [{n}, ...]; got shape {shape}")
        return leaf
    return jax.tree_util.tree_map_with_path(check, tree)


class EpochLoader:
    """The epochs of a loader over ``self._items`` (what an epoch visits): ``iter(loader)`` runs the next epoch,
    ``len(loader)`` counts its batches; ``self._make_batch(items, batch_key, position)`` makes a batch. Epoch
    ``e``'s keys are ``shuffle_key, batch_key = split(fold_in(key, e))``; with ``shuffle`` it visits
    ``items[permutation(shuffle_key, len(items))]``."""

    _items: np.ndarray
    batch_size: int

    def _setup(self, fn: str, key, shuffle: bool, drop_last: bool, prefetch: int, progress, key_required: bool):
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        self.key = check_key(fn, key, self.shuffle, required=key_required)
        self.prefetch = check_prefetch(fn, prefetch)
        self.progress = progress
        self.epoch = 0  # the next epoch iter() runs

    def __len__(self) -> int:
        """Batches per epoch."""
        return len(batch_slices(self._items.size, self.batch_size, self.drop_last))

    def __iter__(self) -> Iterator:
        """The next epoch's batches (``self.epoch`` counts the epochs started)."""
        epoch, self.epoch = self.epoch, self.epoch + 1
        return self.iter_epoch(epoch)

    def iter_epoch(self, epoch: int) -> Iterator:
        """The batches of epoch ``epoch``: they depend on ``key`` and ``epoch`` only."""
        keys = jax.random.split(jax.random.fold_in(self.key, epoch)) if self.key is not None else (None, None)
        shuffle_key, batch_key = keys
        n = self._items.size
        order = self._items[np.asarray(jax.random.permutation(shuffle_key, n))] if self.shuffle else self._items
        slices = batch_slices(n, self.batch_size, self.drop_last)
        batches = (self._make_batch(order[s], batch_key, i) for i, s in enumerate(slices))
        return with_progress(type(self).__name__, prefetched(batches, self.prefetch), self.progress, len(slices),
                             epoch)
