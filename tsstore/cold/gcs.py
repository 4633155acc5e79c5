"""The cold tier's objects in a Google Cloud Storage bucket (:class:`GcsObjects`), the same
:class:`~tsstore.cold.objects.Objects` protocol as a local directory.

An object is written with ``if_generation_match=0``, so a name that exists is refused by the
bucket itself (``412``: :class:`~tsstore.cold.objects.Taken`); a large one in a resumable
upload. Then its stored size and CRC32C are read back and compared with the bytes written
before the answer is :class:`~tsstore.cold.objects.Placed`: an upload cut and resumed can
leave an object whose bytes are not the ones sent (fake-gcs-server was seen committing one
longer than the data from a resumed session, and a network can fail the same way), and the
manifest must only ever name an object whose bytes were checked. An object that does not
match is deleted (under ``if_generation_match`` of its own generation) and the answer is
:class:`~tsstore.cold.objects.Damaged`; the sealer writes the partition again under its
next generation's name.

Connection errors, 5xx answers and 429 go through :mod:`tsstore.faults`' pause rule (the
client's own retry is off, so the pauses are these). ``google-cloud-storage`` is the
``gcs`` extra (``pip install 'tsstore[gcs]'``); the client is made at the first call, on the
default credentials, or anonymous on the server ``STORAGE_EMULATOR_HOST`` names (the client
reads that variable itself).
"""

from __future__ import annotations

import base64
import importlib
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from google.api_core import exceptions as gexc

from tsstore.cold.objects import Damaged, ObjectInfo, ObjectStoreError, Placed, Taken
from tsstore.errors import ConfigError, FaultError
from tsstore.faults import Backoff, Kind, describe, kind_of, retrying

#: Objects larger than this are sent in a resumable upload, in chunks of :data:`CHUNK_BYTES`
#: (a cut then costs the upload, not a retry of one huge request). The client's own threshold
#: for a single request is 8 MiB.
RESUMABLE_ABOVE = 8 * 1024 * 1024
#: The chunk of a resumable upload: a multiple of 256 KiB, as the API asks.
CHUNK_BYTES = 8 * 1024 * 1024

T = TypeVar("T")


class GcsObjects:
    """Objects in the bucket ``bucket`` under ``prefix`` (``gs://bucket/prefix``): names are
    ``/``-separated paths below the prefix. ``client``: a ``google.cloud.storage.Client``
    (default: one made at the first call)."""

    def __init__(self, bucket: str, prefix: str = "", *, client: Any = None) -> None:
        self.bucket_name = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self._client = client
        self._bucket: Any = None
        self._lock = threading.Lock()

    @classmethod
    def at(cls, path: str) -> GcsObjects:
        """The objects at ``gs://bucket/prefix``."""
        bucket, _, prefix = path[len("gs://") :].partition("/")
        return cls(bucket, prefix)

    def _key(self, name: str) -> str:
        parts = name.split("/")
        if not name or any(part in ("", ".", "..") for part in parts):
            raise ConfigError(f"object name {name!r} is not allowed; give a relative path without '.' or '..' parts")
        return self.prefix + name

    def _the_bucket(self) -> Any:
        with self._lock:
            if self._bucket is None:
                self._bucket = (self._client or _client()).bucket(self.bucket_name)
            return self._bucket

    def put_new(self, name: str, data: bytes) -> Placed | Taken | Damaged:
        key, bucket = self._key(name), self._the_bucket()
        what = f"writing {self.url(name)}"

        try:
            blob = call(lambda: self._upload(bucket.blob(key), data), what=what)
        except gexc.PreconditionFailed:
            return Taken(name)  # the name exists (or an attempt of ours cut before its answer landed)
        except gexc.NotFound as exc:
            raise self._no_bucket(what) from exc
        generation = int(blob.generation)
        stored = call(lambda: bucket.get_blob(key, generation=generation, retry=None), what=f"checking {what}")
        wrong = _mismatch(stored, data)
        if wrong is None:
            return Placed(name, generation, len(data))
        self._delete(key, generation, what=f"deleting the damaged {self.url(name)}")
        return Damaged(name, wrong)

    def _upload(self, blob: Any, data: bytes) -> Any:
        """Send ``data`` as ``blob`` if no object has its name (412 otherwise): in one request,
        or resumable in chunks when large. The client's own retry is off (the pauses are
        :func:`call`'s, and a cut upload starts again as a new one)."""
        if len(data) > RESUMABLE_ABOVE:
            blob.chunk_size = CHUNK_BYTES
        kind = "application/json" if blob.name.endswith(".json") else "application/vnd.apache.parquet"
        blob.upload_from_string(data, content_type=kind, if_generation_match=0, checksum="crc32c", retry=None)
        return blob

    def get(self, name: str) -> bytes | None:
        blob = self._the_bucket().blob(self._key(name))
        try:
            found: bytes = call(lambda: blob.download_as_bytes(checksum="crc32c", retry=None),
                                 what=f"reading {self.url(name)}")  # fmt: skip
        except gexc.NotFound:
            return None
        return found

    def list(self, prefix: str) -> list[ObjectInfo]:
        bucket = self._the_bucket()

        def listing() -> list[Any]:
            return list(bucket.client.list_blobs(bucket, prefix=self.prefix + prefix, retry=None))

        what = f"listing gs://{self.bucket_name}/{self.prefix}{prefix}"
        try:
            blobs = call(listing, what=what)
        except gexc.NotFound as exc:
            raise self._no_bucket(what) from exc
        found = [ObjectInfo(b.name[len(self.prefix) :], int(b.generation), int(b.size), b.updated) for b in blobs]
        return sorted(found, key=lambda info: info.name)

    def delete(self, name: str, *, generation: int | None = None) -> bool:
        return self._delete(self._key(name), generation, what=f"deleting {self.url(name)}")

    def _delete(self, key: str, generation: int | None, *, what: str) -> bool:
        bucket = self._the_bucket()
        if generation is not None:  # fake-gcs-server ignores a delete's precondition: asked first, kept for GCS
            found = call(lambda: bucket.get_blob(key, retry=None), what=what)
            if found is None or int(found.generation) != generation:
                return False
        try:
            call(lambda: bucket.delete_blob(key, if_generation_match=generation, retry=None), what=what)
        except (gexc.NotFound, gexc.PreconditionFailed):  # gone, or another generation under the name now
            return False
        return True

    def _no_bucket(self, what: str) -> ObjectStoreError:
        bucket = self.bucket_name
        return ObjectStoreError(f"{what}: there is no bucket {bucket!r}; create it, or give another gs:// path")

    def url(self, name: str) -> str:
        return f"gs://{self.bucket_name}/{self._key(name)}"


def storage_module() -> Any:
    """``google.cloud.storage``, or an error naming the extra that installs it."""
    try:
        return importlib.import_module("google.cloud.storage")
    except ImportError as exc:
        raise ConfigError(
            "a cold tier in gs:// needs google-cloud-storage, which is not installed: pip install 'tsstore[gcs]'"
        ) from exc


def _client() -> Any:
    storage = storage_module()
    from google.auth.exceptions import DefaultCredentialsError

    try:
        return storage.Client()
    except DefaultCredentialsError as exc:
        raise ConfigError(
            f"a cold tier in gs:// needs Google Cloud credentials, and none were found ({exc}); run "
            "'gcloud auth application-default login' or set GOOGLE_APPLICATION_CREDENTIALS (STORAGE_EMULATOR_HOST "
            "for a local server)"
        ) from None


def crc32c(data: bytes) -> str:
    """The CRC32C of ``data`` as Cloud Storage gives it: base64 of its four big-endian bytes."""
    import google_crc32c

    return base64.b64encode(google_crc32c.value(data).to_bytes(4, "big")).decode()


def _mismatch(stored: Any, data: bytes) -> str | None:
    """How the stored object differs from ``data`` (``None``: it does not)."""
    if stored is None:
        return "no object was stored under the name"
    if int(stored.size) != len(data):
        return f"{stored.size} bytes were stored of the {len(data)} written"
    if stored.crc32c != crc32c(data):
        return f"its CRC32C is {stored.crc32c}, not the {crc32c(data)} of the bytes written"
    return None


def gcs_kind(exc: BaseException) -> Kind | None:
    """Whether a failed Cloud Storage call is a fault (a connection error, a 5xx answer, a
    transfer the client found corrupt), an overload (429), or neither (``None``)."""
    import requests

    if isinstance(exc, gexc.TooManyRequests):
        return "overload"
    if isinstance(exc, gexc.ServerError) and not isinstance(exc, gexc.MethodNotImplemented):
        return "fault"
    if isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout):
        return "fault"
    if isinstance(exc, requests.exceptions.ChunkedEncodingError):
        return "fault"
    from google.auth.exceptions import TransportError
    from google.cloud.storage.exceptions import DataCorruption, InvalidResponse

    if isinstance(exc, TransportError | DataCorruption):
        return "fault"
    if isinstance(exc, InvalidResponse):  # a resumable upload's chunk answered with an unexpected status
        status = getattr(exc.response, "status_code", 0)
        return "overload" if status == 429 else "fault" if status >= 500 else None
    return kind_of(exc)


#: Answers a caller takes as what they say (no such object; a precondition not met).
_ANSWERS = (gexc.NotFound, gexc.PreconditionFailed)


def call(
    fn: Callable[[], T], *, what: str, backoff: Backoff | None = None, sleep: Callable[[float], object] = time.sleep
) -> T:
    """``fn()``, tried again after faults and overloads under :class:`~tsstore.faults.Backoff`;
    a :class:`~tsstore.errors.FaultError` naming ``what`` once its budget is spent, and an
    :class:`~tsstore.cold.objects.ObjectStoreError` for a refusal trying again cannot help
    (403, 400: the bucket's access, the request)."""
    backoff = backoff or Backoff()
    while True:
        try:
            return fn()
        except _ANSWERS:
            raise
        except Exception as exc:
            if gcs_kind(exc) is None:
                if isinstance(exc, gexc.GoogleAPICallError):
                    raise ObjectStoreError(f"{what}: Cloud Storage refused it ({describe(exc)})") from exc
                raise
            pause = backoff.pause()
            if pause is None:
                raise FaultError(
                    f"{what} failed: every attempt for {backoff.elapsed:.0f} s failed before Cloud Storage answered "
                    f"({backoff.failures} attempts; last: {describe(exc)}). Check the network and the bucket, then "
                    "run it again"
                ) from exc
            retrying(what, exc, pause, backoff)
            sleep(pause)
