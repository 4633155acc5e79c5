"""Security rules from the declaration, without Firestore: who may read and create
(``ClientAccess``), the generated block, its merge into a user's rules file, ``firebase.json``,
and the ``tsstore rules`` and ``tsstore emulator start --rules`` commands. What the emulator's
rules engine does with the generated rules is tests/test_rules_emulator.py."""

from __future__ import annotations

import datetime as dt
import json
import tomllib
from pathlib import Path

import pytest

from tests.cli import tsstore
from tests.conftest import FirebaseTools
from tests.test_rules_emulator import ALLOW, DECLARATIONS, DENY, Case, Project, create, meter, run, run_query
from tsstore.access import ClientAccess, access_from
from tsstore.analytics.rollup import Rollup
from tsstore.declaration import load_declaration
from tsstore.demo import DECLARATION
from tsstore.deploy import plan_firebase_json
from tsstore.errors import EmulatorError, SpecError
from tsstore.local.emulator import _http, load_rules
from tsstore.rules.build import rules_lines
from tsstore.rules.file import BEGIN, END, merge_rules, plan_rules_file, render_rules, user_rules_warnings
from tsstore.spec import SeriesSpec, spec_from_mapping

ROOT = Path(__file__).resolve().parent.parent

USER_RULES = """rules_version = '2';
// my own rules: profiles belong to their users
service cloud.firestore {
  match /databases/{database}/documents {
    match /profiles/{uid} {
      allow read, write: if request.auth != null && request.auth.uid == uid;
    }
  }
}
"""


def text_of(*specs: SeriesSpec, rollups: tuple[Rollup, ...] = ()) -> str:
    return "\n".join(rules_lines(specs, rollups))


# --- ClientAccess -------------------------------------------------------------------------------


def test_access_defaults_to_signed_in_reads_and_no_client_writes() -> None:
    access = SeriesSpec("ticks").access
    assert (access.read, access.create, access.condition, access.max_limit) == ("signed-in", "none", None, 1000)
    assert access.reads and not access.creates


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"read": "everyone"}, "access read='everyone' is not allowed; use one of none, signed-in, public, custom"),
        ({"create": "public"}, "anyone could write ticks"),
        ({"create": "always"}, "access create='always' is not allowed; use one of none, signed-in, custom"),
        ({"read": "custom"}, "needs condition, a security rules expression"),
        ({"read": "custom", "condition": "  "}, "needs condition"),
        ({"condition": "true"}, "is used only with read='custom' or create='custom'"),
        ({"read": "custom", "condition": "a ==\nb"}, "must be one line"),
        ({"max_limit": 0}, "access max_limit 0 is not allowed; give a positive integer"),
        ({"max_limit": True}, "access max_limit True is not allowed"),
        ({"max_limit": 10.5}, "access max_limit 10.5 is not allowed"),
    ],
)
def test_access_refuses_what_it_cannot_generate(options: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        access_from(options)


def test_access_comes_from_a_keyword_a_table_or_an_object() -> None:
    assert access_from("public") == ClientAccess("public")
    assert access_from({"read": "none"}) == ClientAccess("none")
    with pytest.raises(SpecError, match=r"unknown key\(s\) \['reads'\] in access"):
        access_from({"reads": "public"})
    with pytest.raises(SpecError, match="access 3 is not allowed"):
        access_from(3)
    spec = spec_from_mapping(
        tomllib.loads('collection = "t"\naccess = {read = "public", max_limit = 50, create = "signed-in"}')
    )
    assert spec.access == ClientAccess("public", create="signed-in", max_limit=50)


def test_a_rollup_reads_like_its_source_and_is_never_written_by_clients() -> None:
    source = SeriesSpec("ticks", access=ClientAccess("custom", create="custom", condition="request.auth.token.x == 1"))
    bars = Rollup(source, interval="1min", by="symbol")
    assert bars.spec.access == ClientAccess("custom", condition="request.auth.token.x == 1")
    assert Rollup(source, by="symbol", access="public").spec.access == ClientAccess("public")
    with pytest.raises(SpecError, match="a roll-up is written by the server only"):
        Rollup(source, by="symbol", access={"create": "signed-in"})


def test_a_declaration_file_declares_access_for_series_and_rollups(tmp_path: Path) -> None:
    path = tmp_path / "series.toml"
    path.write_text(
        '[[series]]\ncollection = "ticks"\nkey_fields = ["symbol"]\naccess = {create = "signed-in"}\n'
        '[[rollup]]\nsource = "ticks"\nby = "symbol"\naccess = "none"\n'
    )
    (spec,), (rollup,) = load_declaration(str(path))
    assert spec.access.create == "signed-in" and rollup.spec.access == ClientAccess("none")
    assert "// ticks_1min (1min bars of ticks): no client reads; no client writes" in text_of(spec, rollups=(rollup,))


# --- the block ------------------------------------------------------------------------------------


def test_reads_need_the_condition_and_a_bounded_limit() -> None:
    signed_in = text_of(SeriesSpec("ticks"))
    assert "allow get: if request.auth != null;" in signed_in
    assert (
        "allow list: if request.auth != null && request.query.limit <= 1000 && request.query.offset == 0;" in signed_in
    )
    assert "allow create" not in signed_in and "allow update" not in signed_in and "delete" not in signed_in
    public = text_of(SeriesSpec("ticks", access=ClientAccess("public", max_limit=20)))
    assert (
        "allow get: if true;" in public
        and "allow list: if request.query.limit <= 20 && request.query.offset == 0;" in public
    )
    custom = text_of(SeriesSpec("ticks", access=ClientAccess("custom", condition="request.auth.token.desk == 'fx'")))
    assert "allow get: if (request.auth.token.desk == 'fx');" in custom


def test_no_client_access_is_a_comment_and_no_match() -> None:
    text = text_of(SeriesSpec("ticks", access="none", count_by=["symbol"]))
    assert text == "// ticks: no client reads; no client writes"


def test_a_create_checks_every_declared_field() -> None:
    spec = SeriesSpec(
        "ticks",
        shards=["a", "b"],
        retired=["old"],
        shapes=["exchange"],
        key_fields=["symbol"],
        columns={"symbol": "string", "price.micros": "Int64", "price.currency": "string", "ok": "boolean"},
        measures=["size"],
        expire_after=dt.timedelta(days=7),
        access=ClientAccess(create="signed-in"),
    )
    text = text_of(spec)
    assert "d.keys().hasOnly(['exchange', 'expireAt', 'ok', 'price', 'shard', 'size', 'symbol', 'timestamp'])" in text
    assert "d.keys().hasAll(['expireAt', 'shard', 'symbol', 'timestamp'])" in text
    assert "d.shard in ['a', 'b']" in text  # the active values only: a retired one would hide the tick
    assert "d.symbol is string" in text and "d.timestamp is timestamp" in text
    assert "(!('ok' in d) || d.ok == null || d.ok is bool)" in text
    assert "(!('size' in d) || d.size == null || d.size is number)" in text  # a measure without a type
    assert "d.price.keys().hasOnly(['currency', 'micros'])" in text
    assert "(!('micros' in d.price) || d.price.micros == null || d.price.micros is int)" in text
    assert "d.expireAt == d.timestamp + duration.value(604800, 's')" in text
    assert "allow create: if request.auth != null && validTick(request.resource.data);" in text
    assert "(d.exchange is string || d.exchange is number || d.exchange is bool || d.exchange is timestamp)" in text


def test_names_and_values_are_quoted_for_the_rules_language() -> None:
    spec = SeriesSpec(
        "odd ticks",
        shards=["it's", "back\\slash"],
        key_fields=["in"],
        columns={"in": "string"},
        expire_after=dt.timedelta(seconds=1, microseconds=5),
        access={"create": "signed-in"},
    )
    text = text_of(spec)
    assert "match /{collection}/{tick} {" in text
    assert "allow get: if collection == 'odd ticks' && request.auth != null;" in text
    assert "d.shard in ['it\\'s', 'back\\\\slash']" in text
    assert "d['in'] is string" in text  # a keyword cannot follow a dot
    assert "duration.value(1000005000, 'ns')" in text
    assert "match /ticks-a.b_1/{tick} {" in text_of(SeriesSpec("ticks-a.b_1"))


def test_counted_series_let_clients_add_to_counter_shards_only() -> None:
    reads_only = text_of(SeriesSpec("ticks", count_by=["symbol"]))
    assert "match /ticks_counts/{series} {" in reads_only and "match /shards/{shard} {" in reads_only
    assert "allow get, list: if request.auth != null;" in reads_only  # a counter has counter_shards shards
    assert "allow update" not in reads_only
    creates = text_of(SeriesSpec("ticks", count_by=["symbol"], access={"create": "signed-in"}))
    update = creates.split("allow update: if ", 1)[1].split(";", 1)[0].split()
    assert " ".join(update) == (
        "request.auth != null && request.resource.data.diff(resource.data).affectedKeys().hasOnly(['count']) "
        "&& request.resource.data.count is int && request.resource.data.count > resource.data.count"
    )


def test_a_field_declared_as_a_value_and_as_a_map_is_refused() -> None:
    spec = SeriesSpec("t", columns={"price": "Int64", "price.micros": "Int64"}, access={"create": "signed-in"})
    with pytest.raises(SpecError, match="field 'price' is declared as a value and as a map"):
        text_of(spec)


def test_two_specs_for_one_collection_are_refused() -> None:
    with pytest.raises(SpecError, match="two different SeriesSpecs declare collection 'ticks'"):
        rules_lines([SeriesSpec("ticks"), SeriesSpec("ticks", shards=["a"])])
    with pytest.raises(SpecError, match="no SeriesSpec given"):
        rules_lines([])


def test_the_demo_rules_cover_ticks_bars_and_the_watermark() -> None:
    specs, rollups = load_declaration("tsstore.demo:DECLARATION")
    text = render_rules(specs, rollups)
    assert text.startswith("rules_version = '2';\n")
    for line in (
        "match /instruments/{tick} {",
        "allow create: if (request.auth.token.feed == true)\n          && validTick(request.resource.data)\n"
        "          && markedIfLate(request.resource.data.timestamp, 'instruments_1min', 60000);",
        "match /instruments_1min/{bar} {",
        "match /tsstore_rollups/instruments_1min {",
        "match /tsstore_rollups/instruments_1min/marks/{mark} {",
    ):
        assert line in text
    bars = text.split("match /instruments_1min/{bar} {", 1)[1].split("}", 1)[0]
    assert "create" not in bars
    assert DECLARATION[1].spec.access.creates is False


# --- the file ---------------------------------------------------------------------------------------


def test_merging_keeps_the_users_rules_byte_for_byte(tmp_path: Path) -> None:
    spec = SeriesSpec("ticks")
    merged = merge_rules(USER_RULES, [spec])
    assert merged.count(BEGIN) == 1 and merged.count(END) == 1
    lines = merged.splitlines(keepends=True)
    begin = next(i for i, line in enumerate(lines) if BEGIN in line)
    end = next(i for i, line in enumerate(lines) if END in line)
    assert "".join(lines[:begin] + lines[end + 1 :]) == USER_RULES  # every other line, as it was
    assert merged.index(BEGIN) > merged.index("match /databases/{database}/documents {")
    assert merged.index(END) < merged.index("match /profiles/{uid}")
    # regenerated for another declaration: only the block changes
    again = merge_rules(merged, [SeriesSpec("ticks", access="public")])
    assert again.split(BEGIN)[0] == merged.split(BEGIN)[0] and again.split(END)[1] == merged.split(END)[1]
    assert "allow get: if true;" in again and "allow get: if request.auth != null;" not in again
    assert merge_rules(again, [spec]) == merged  # and back


def test_merging_keeps_crlf_and_indentation() -> None:
    crlf = USER_RULES.replace("\n", "\r\n")
    merged = merge_rules(crlf, [SeriesSpec("ticks")])
    assert "\n" not in merged.replace("\r\n", "")
    assert "\r\n    // tsstore:begin" in merged and "\r\n    match /ticks/{tick} {\r\n" in merged


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("service cloud.firestore {}\n", "has 0 'match /databases/{database}/documents {' line"),
        (f"{BEGIN}\n{BEGIN}\n{END}\n", r"has 2 '// tsstore:begin' and 1 '// tsstore:end' line\(s\) \(lines 1, 2, 3\)"),
        (f"{END}\n{BEGIN}\n", "begin first"),
        (f"{BEGIN}\n", "has 1 '// tsstore:begin' and 0"),
    ],
)
def test_a_file_where_the_block_has_no_one_place_is_refused(text: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        merge_rules(text, [SeriesSpec("ticks")], name="firestore.rules")


def test_a_recursive_wildcard_in_the_users_rules_is_warned_of() -> None:
    mine = USER_RULES.replace("/profiles/{uid}", "/{document=**}")
    assert user_rules_warnings(merge_rules(mine, [SeriesSpec("ticks")])) == [
        "your rules have 'match /{document=**}': a rule under it that allows a request allows it for the "
        "generated collections too (Firestore allows what any rule allows)"
    ]
    assert user_rules_warnings(merge_rules(USER_RULES, [SeriesSpec("ticks")])) == []


def test_firebase_json_is_made_to_name_the_file(tmp_path: Path) -> None:
    new = plan_firebase_json(tmp_path, "rules", "firestore.rules")
    assert json.loads(new.new_text or "") == {"firestore": {"rules": "firestore.rules"}} and new.warning is None
    (tmp_path / "firebase.json").write_text('{"hosting": {"public": "web"}, "firestore": {"indexes": "i.json"}}')
    added = plan_firebase_json(tmp_path, "rules", "firestore.rules")
    assert json.loads(added.new_text or "") == {
        "hosting": {"public": "web"},
        "firestore": {"indexes": "i.json", "rules": "firestore.rules"},
    }
    added.write()
    assert plan_firebase_json(tmp_path, "rules", "firestore.rules").new_text is None  # named: nothing to do
    other = plan_firebase_json(tmp_path, "indexes", "firestore.indexes.json")
    assert other.new_text is None and other.warning is not None and "names 'i.json'" in other.warning
    (tmp_path / "firebase.json").write_text('{"firestore": [{"database": "(default)", "rules": "a.rules"}]}')
    listed = plan_firebase_json(tmp_path, "rules", "firestore.rules")
    assert listed.new_text is None and "several databases" in (listed.warning or "")
    (tmp_path / "firebase.json").write_text('{\n  // mine\n  "hosting": {},\n}\n')
    commented = plan_firebase_json(tmp_path, "rules", "firestore.rules")
    assert "comments and trailing commas" in (commented.warning or "") and commented.new_text is not None


def test_firebase_tools_accepts_a_firebase_json_naming_both_files(firebase_tools: FirebaseTools) -> None:
    assert firebase_tools.validate("config", ROOT / "indexes" / "firebase.json") == {"ok": True}
    assert json.loads((ROOT / "indexes" / "firebase.json").read_text())["firestore"] == {
        "indexes": "firestore.indexes.json",
        "rules": "firestore.rules",
    }


def test_plan_rules_file_writes_a_new_file_and_its_firebase_json(tmp_path: Path) -> None:
    path = tmp_path / "deploy" / "firestore.rules"
    update = plan_rules_file(path, [SeriesSpec("ticks")])
    assert update.changed and update.old_text is None
    assert update.diff() == f"{path} does not exist\n{path.parent / 'firebase.json'} does not name firestore.rules\n"
    assert update.write() == [path, path.parent / "firebase.json"]
    again = plan_rules_file(path, [SeriesSpec("ticks")])
    assert not again.changed and again.write() == []


# --- the commands ---------------------------------------------------------------------------------


def test_the_committed_demo_rules_are_current() -> None:
    ran = tsstore("rules", "tsstore.demo:DECLARATION", "--check", cwd=ROOT)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout == "indexes/firestore.rules is up to date with tsstore.demo:DECLARATION\n"


def test_rules_command_merges_checks_and_prints(tmp_path: Path) -> None:
    (tmp_path / "schema.py").write_text(
        "from tsstore import SeriesSpec\nTICKS = SeriesSpec('ticks', key_fields=['symbol'], access='public')\n"
    )
    rules = tmp_path / "indexes" / "firestore.rules"
    rules.parent.mkdir()
    rules.write_text(USER_RULES)
    missing = tsstore("rules", "--check", "--spec", "schema:TICKS", cwd=tmp_path)
    assert missing.returncode == 1
    assert "+    match /ticks/{tick} {" in missing.stdout and "does not name firestore.rules" in missing.stdout
    assert "is not what schema:TICKS yields; run: tsstore rules --spec schema:TICKS" in missing.stderr
    wrote = tsstore("rules", "schema:TICKS", cwd=tmp_path)
    assert wrote.returncode == 0 and wrote.stdout == "wrote indexes/firestore.rules, indexes/firebase.json\n"
    text = rules.read_text()
    assert "match /profiles/{uid} {" in text and "allow get: if true;" in text
    assert tsstore("rules", "schema:TICKS", "--check", cwd=tmp_path).returncode == 0
    (tmp_path / "indexes" / "firebase.json").write_text('{"firestore": {}}')  # the rules file is current
    unnamed = tsstore("rules", "schema:TICKS", "--check", cwd=tmp_path)
    assert unnamed.returncode == 1 and unnamed.stdout == "indexes/firebase.json does not name firestore.rules\n"
    assert "Error: indexes/firebase.json does not name firestore.rules; run: tsstore rules" in unnamed.stderr
    assert tsstore("rules", "schema:TICKS", cwd=tmp_path).stdout == "wrote indexes/firebase.json\n"
    assert tsstore("rules", "schema:TICKS", cwd=tmp_path).stdout == "indexes/firestore.rules already up to date\n"
    printed = tsstore("rules", "schema:TICKS", "--stdout", "--file", str(tmp_path / "none.rules"), cwd=tmp_path)
    assert printed.stdout.startswith("rules_version = '2';") and not (tmp_path / "none.rules").exists()
    # an index file written later joins the rules in the same firebase.json
    assert tsstore("indexes", "schema:TICKS", cwd=tmp_path).returncode == 0
    assert json.loads((tmp_path / "indexes" / "firebase.json").read_text()) == {
        "firestore": {"rules": "firestore.rules", "indexes": "firestore.indexes.json"}
    }


def test_rules_command_errors_in_one_line(tmp_path: Path) -> None:
    no_spec = tsstore("rules", cwd=tmp_path, env={"TSSTORE_SPEC": None})
    assert no_spec.returncode == 2 and "which declaration?" in no_spec.stderr
    broken = tmp_path / "indexes" / "firestore.rules"
    broken.parent.mkdir()
    broken.write_text("service cloud.firestore {}\n")
    ran = tsstore("rules", "tsstore.demo:DECLARATION", cwd=tmp_path)
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1 and "Traceback" not in ran.stderr  # a declaration error
    assert "put the lines '// tsstore:begin' and '// tsstore:end' where the generated block should go" in ran.stderr
    (tmp_path / "indexes" / "firestore.rules").write_text(USER_RULES.replace("/profiles/{uid}", "/{document=**}"))
    warned = tsstore("rules", "tsstore.demo:DECLARATION", cwd=tmp_path)
    assert warned.returncode == 0 and warned.stderr.startswith("warning: your rules have 'match /{document=**}'")


@pytest.mark.emulator  # it starts an emulator of its own
def test_emulator_start_enforces_a_rules_file(tmp_path: Path) -> None:
    """``tsstore emulator start --rules``, whose store starts its emulator with
    ``start_emulator(rules=path)``: the file holds on any project id (the meters declaration's
    cases of tests/test_rules_emulator.py, on two projects); rules that do not compile are
    refused naming the file and line, at the start (no store left) and when loaded later (the
    project keeps the rules it had). One store for both, one JVM start fewer than a test each."""
    env = {"FIRESTORE_EMULATOR_HOST": None, "GOOGLE_CLOUD_PROJECT": None, "TSSTORE_HOME": str(tmp_path / "home")}
    bad = tmp_path / "bad.rules"
    bad.write_text("rules_version = '2';\nservice cloud.firestore { oops }\n")
    text = render_rules(*DECLARATIONS["meters"])
    rules = tmp_path / "firestore.rules"
    rules.write_text(text, encoding="utf-8")
    checks = [
        Case("list-bounded", "meters", "anonymous", run_query("meters", limit=5), ALLOW),
        Case("list-unbounded", "meters", "anonymous", run_query("meters"), DENY),
        Case("create-anonymous", "meters", "anonymous", create("meters", meter()), DENY),
        Case("create-signed-in", "meters", "signed-in", create("meters", meter()), ALLOW),
        Case("create-extra", "meters", "signed-in", create("meters", meter({"x": 1})), DENY),
        Case("closed-list", "meters", "signed-in", run_query("closed", limit=1), DENY),
        Case("owner-closed", "meters", "owner", run_query("closed"), ALLOW),
    ]
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "allow get: if true;" in t)
    broken = text.replace("allow get: if true;", "allow get: if tru e;", 1)
    try:
        # A file the store's emulator refuses as it starts: a usage error in one line, no store left.
        refused = tsstore("emulator", "start", "--rules", str(bad), env=env, cwd=tmp_path)
        assert refused.returncode == 2 and refused.stderr.count("Error:") == 1, refused.stderr
        assert "the emulator refused the rules in bad.rules:\nbad.rules:2:" in refused.stderr
        assert "not running" in tsstore("emulator", "status", env=env, cwd=tmp_path).stdout
        started = tsstore("emulator", "start", "--rules", str(rules), env=env, cwd=tmp_path)
        assert started.returncode == 0, started.stderr
        assert f"enforcing the rules in {rules} on every project" in started.stdout
        assert "warning:" not in started.stderr, started.stderr  # the file compiles without warnings
        status = tsstore("emulator", "status", env=env, cwd=tmp_path)
        assert f"enforcing the rules in {rules.resolve()} on every project" in status.stdout
        address = status.stdout.split("running at ")[1].split()[0]
        denied, said = _http("POST", f"http://{address}/v1/projects/p1/databases/(default)/documents/ticks", body={})
        assert denied == 403 and "PERMISSION_DENIED" in said  # a collection the file does not declare
        for name in ("rules-file-one", "rules-file-two"):
            project = Project(f"http://{address}", name)
            for case in checks:
                result = run({"meters": project}, case)
                assert result.as_expected, f"project {name}: {result.describe()}"
        with pytest.raises(EmulatorError) as failed:
            load_rules(f"http://{address}", broken, project="rules-file-one", name="broken.rules")
        assert f"broken.rules:{line}:" in str(failed.value), failed.value
        for case in checks:
            result = run({"meters": Project(f"http://{address}", "rules-file-one")}, case)
            assert result.as_expected, f"after the refused load: {result.describe()}"
        reloaded = tsstore("emulator", "start", "--rules", str(rules), env=env, cwd=tmp_path)
        assert reloaded.returncode == 0 and "on project tsstore-local" in reloaded.stdout
        status = tsstore("emulator", "status", env=env, cwd=tmp_path)
        assert f"enforcing the rules in {rules.resolve()} on project tsstore-local" in status.stdout
        refused = tsstore("emulator", "start", "--rules", str(bad), env=env, cwd=tmp_path)
        assert refused.returncode == 2 and refused.stderr.count("Error:") == 1, refused.stderr  # reloaded: the same
        assert "the emulator refused the rules in bad.rules:\nbad.rules:2:" in refused.stderr
    finally:
        tsstore("emulator", "stop", env=env, cwd=tmp_path)
