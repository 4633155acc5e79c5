"""tsstore.local.emulator against the real Firestore emulator (no fakes of the client or the JVM)."""

from __future__ import annotations

import os
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.cloud import firestore

from tsstore.errors import EmulatorError
from tsstore.local import emulator as emulator_module
from tsstore.local.emulator import (
    JVM_FLAGS,
    Emulator,
    emulator_client,
    find_emulator_command,
    free_port,
    start_emulator,
)

pytestmark = pytest.mark.emulator  # every test here starts emulators of its own


def _ids(collection: firestore.CollectionReference) -> list[str]:
    return sorted(snapshot.id for snapshot in collection.stream())


def _port_accepts(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0


@pytest.fixture(scope="module")
def own_emulator() -> Iterator[Emulator]:
    """A second emulator for tests that would disturb the shared one (full reset, port clash).

    Started with an explicit port, which is part of what it tests.
    """
    running = start_emulator(port=free_port())
    try:
        yield running
    finally:
        running.stop()


def test_client_writes_and_reads(client: firestore.Client, collection_name: str) -> None:
    doc = client.collection(collection_name).document("a")
    doc.set({"price": 1.5, "symbol": "XYZ"})
    assert doc.get().to_dict() == {"price": 1.5, "symbol": "XYZ"}


def test_client_ignores_and_restores_the_process_environment(
    emulator: Emulator, database_id: str, collection_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whatever FIRESTORE_EMULATOR_HOST says, emulator.client() talks to *this* emulator,
    # and the variable is left as it was.
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:9")
    made = emulator.client(database=database_id)
    try:
        assert os.environ["FIRESTORE_EMULATOR_HOST"] == "127.0.0.1:9"
        made.collection(collection_name).document("x").set({"v": 1})
        assert made.collection(collection_name).document("x").get().to_dict() == {"v": 1}
    finally:
        made.close()
    monkeypatch.delenv("FIRESTORE_EMULATOR_HOST")
    made = emulator.client(database=database_id)
    made.close()
    assert "FIRESTORE_EMULATOR_HOST" not in os.environ


def test_channel_options_reach_the_clients_channel(emulator: Emulator, database_id: str, collection_name: str) -> None:
    # a receive limit smaller than the document: only a channel that took the option refuses it
    emulator.client(database=database_id).collection(collection_name).document("big").set({"text": "x" * 4096})
    for options, refused in (((), False), ((("grpc.max_receive_message_length", 1024),), True)):
        made = emulator_client(emulator.address, database=database_id, channel_options=options)
        try:
            if refused:
                with pytest.raises(Exception, match="(?i)larger than max|resource.?exhausted"):
                    made.collection(collection_name).document("big").get()
            else:
                assert len(made.collection(collection_name).document("big").get().to_dict()["text"]) == 4096
        finally:
            made.close()


@pytest.mark.parametrize("turn", ["first", "second"])
def test_each_test_has_its_own_database(client: firestore.Client, turn: str) -> None:
    # Both runs write into the same collection name; whichever runs second would see the
    # other's document if the per-test databases were not isolated.
    shared = client.collection("shared-between-tests")
    shared.document(turn).set({"turn": turn})
    assert _ids(shared) == [turn]


def test_databases_and_projects_are_isolated(emulator: Emulator, collection_name: str) -> None:
    one = emulator.client(database=f"iso-{uuid.uuid4().hex[:8]}")
    two = emulator.client(database=f"iso-{uuid.uuid4().hex[:8]}")
    other_project = emulator.client(project="tsstore-other", database=one._database)
    try:
        for made, value in ((one, 1), (two, 2), (other_project, 3)):
            made.collection(collection_name).document("same-id").set({"v": value})
        assert one.collection(collection_name).document("same-id").get().to_dict() == {"v": 1}
        assert two.collection(collection_name).document("same-id").get().to_dict() == {"v": 2}
        assert other_project.collection(collection_name).document("same-id").get().to_dict() == {"v": 3}
    finally:
        for made in (one, two, other_project):
            made.close()


def test_reset_of_one_database_clears_only_it(emulator: Emulator, collection_name: str) -> None:
    target = f"reset-{uuid.uuid4().hex[:8]}"
    kept = f"keep-{uuid.uuid4().hex[:8]}"
    cleared, untouched = emulator.client(database=target), emulator.client(database=kept)
    try:
        for made in (cleared, untouched):
            for i in range(5):
                made.collection(collection_name).document(f"d{i}").set({"i": i})
        emulator.reset(project="tsstore-local", database=target)
        assert _ids(cleared.collection(collection_name)) == []
        assert len(_ids(untouched.collection(collection_name))) == 5
    finally:
        cleared.close()
        untouched.close()


def test_full_reset_wipes_every_database(own_emulator: Emulator, collection_name: str) -> None:
    clients = [own_emulator.client(database="(default)"), own_emulator.client(project="p2", database="named-db")]
    try:
        for made in clients:
            made.collection(collection_name).document("x").set({"v": 1})
        own_emulator.reset()
        assert [_ids(made.collection(collection_name)) for made in clients] == [[], []]
    finally:
        for made in clients:
            made.close()


def test_a_taken_port_is_an_error_not_someone_elses_emulator(own_emulator: Emulator) -> None:
    # Another emulator answers `Ok` on this port; ours must still be reported as failed.
    assert own_emulator.is_running()
    with pytest.raises(EmulatorError) as caught:
        start_emulator(port=own_emulator.port, timeout=30)
    message = str(caught.value)
    assert f":{own_emulator.port}" in message
    assert "already in use" in message and "BindException" in message
    assert "--port=" in message  # the command line is in the message
    assert own_emulator.is_running()
    made = own_emulator.client(database=f"alive-{uuid.uuid4().hex[:8]}")
    try:
        made.collection("c").document("d").set({"ok": True})
        assert made.collection("c").document("d").get().to_dict() == {"ok": True}
    finally:
        made.close()


def test_a_port_taken_between_choice_and_bind_is_retried_and_stop_ends_the_jvm_once(
    own_emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Simulate the race: the first "free" port handed out is already in use by a real emulator.
    real_free_port = emulator_module.free_port
    handed = iter([own_emulator.port])
    monkeypatch.setattr(
        emulator_module, "free_port", lambda host="127.0.0.1": next(handed, None) or real_free_port(host)
    )
    with start_emulator() as started:  # the default wait: a JVM on a loaded machine takes its time
        assert started.port != own_emulator.port
        assert started.is_running() and started.address == f"127.0.0.1:{started.port}"
        pid, port, log = started.pid, started.port, started.log_path
        assert _port_accepts(started.host, port)
        running = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert all(flag.encode() in running for flag in JVM_FLAGS)  # e.g. the compile thresholds
    assert own_emulator.is_running()
    # Its stop (the with block's): the JVM ended, its port closed, its log gone but its tail kept,
    # and a second stop is no error and signals nothing. (One JVM for both tests: each start
    # costs seconds of CPU.)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not _port_accepts(started.host, port)
    assert not started.is_running()
    assert not log.exists()
    assert "shutting down" in started.log_tail()
    started.stop()
    assert not started.is_running()


def test_data_dir_survives_stop_and_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with start_emulator(data_dir=data) as first:
        default, named = first.client(), first.client(project="p2", database="kept-db")
        default.collection("c").document("a").set({"v": "default"})
        named.collection("c").document("b").set({"v": "named"})
        default.close()
        named.close()
    assert (data / "tsstore-local" / "(default)").is_dir()
    with start_emulator(data_dir=data) as second:
        default, named = second.client(), second.client(project="p2", database="kept-db")
        try:
            assert default.collection("c").document("a").get().to_dict() == {"v": "default"}
            assert named.collection("c").document("b").get().to_dict() == {"v": "named"}
            # restored into the project it came from only
            elsewhere = second.client(project="p3", database="kept-db")
            assert _ids(elsewhere.collection("c")) == []
            elsewhere.close()
        finally:
            default.close()
            named.close()


def test_a_corrupt_cds_archive_does_not_break_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A truncated archive with a valid header makes the JVM die of SIGBUS at start (measured):
    # start_emulator must notice, drop the archive and start without one.
    base = find_emulator_command()
    if "-cp" not in base:
        pytest.fail(f"this machine has only the gcloud wrapper ({base}); CDS is not used there")
    java, jar = base[0], base[base.index("-cp") + 1]
    cached = emulator_module._cds_archive(java, Path(jar))  # the user's own, made by an earlier start
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    archive = emulator_module._cds_archive(java, Path(jar))
    assert archive is not None and archive.parent == tmp_path / "tsstore"
    # A real archive of this java + jar, cut short: the one earlier starts left in the cache, or
    # else one the JVM dumps when `--version` exits.
    whole = tmp_path / "whole.jsa"
    if cached is not None and cached.is_file() and cached.stat().st_size > 5000:
        whole = cached
    else:
        dump = [base[0], f"-XX:ArchiveClassesAtExit={whole}", *base[1:-1], "--version"]
        subprocess.run(dump, capture_output=True, check=True, timeout=60)
    with open(whole, "rb") as handle:
        archive.write_bytes(handle.read(5000))
    with start_emulator() as started:  # the default wait: a JVM on a loaded machine takes its time
        assert started.is_running()
        assert not any("SharedArchiveFile" in part for part in started.command)
    assert not archive.exists()


def test_find_emulator_command_uses_the_explicit_jar(monkeypatch: pytest.MonkeyPatch) -> None:
    jar = next(part for part in find_emulator_command() if part.endswith(".jar"))
    monkeypatch.setenv("TSSTORE_EMULATOR_JAR", jar)
    command = find_emulator_command()
    assert command[command.index("-cp") + 1] == jar
    assert command[-2:] == [emulator_module.MAIN_CLASS, "start"]


def test_find_emulator_command_reports_a_bad_explicit_jar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nope.jar"
    monkeypatch.setenv("TSSTORE_EMULATOR_JAR", str(missing))
    with pytest.raises(EmulatorError, match="TSSTORE_EMULATOR_JAR") as caught:
        find_emulator_command()
    assert "apt-get install google-cloud-cli-firestore-emulator" in str(caught.value)


def test_find_emulator_command_reports_a_missing_java(monkeypatch: pytest.MonkeyPatch) -> None:
    jar = next(part for part in find_emulator_command() if part.endswith(".jar"))
    monkeypatch.setenv("TSSTORE_EMULATOR_JAR", jar)
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(EmulatorError, match="no `java`") as caught:
        find_emulator_command()
    assert "openjdk-17-jre-headless" in str(caught.value)


def test_free_port_is_bindable() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        assert sock.getsockname()[1] == port
