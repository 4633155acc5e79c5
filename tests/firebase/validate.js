// Validate index files and firebase.json with firebase-tools' own code, offline.
//
//   node validate.js indexes FILE      -> loadCJSON + upgradeOldSpec + validateSpec (what
//                                         `firebase deploy --only firestore:indexes` runs
//                                         before its first network call)
//   node validate.js config FILE       -> firebase.json against the CLI's config schema
//   node validate.js serve             -> the same for each "KIND<TAB>FILE" line on stdin, a JSON
//                                         line each on stdout (the CLI's modules load once)
//
// Prints one JSON line per file; a single check exits 0 when valid, 1 with the CLI's own message when not.
"use strict";
const { loadCJSON } = require("firebase-tools/lib/loadCJSON");

function validate(kind, file) {
  try {
    if (kind === "indexes") {
      const { FirestoreApi } = require("firebase-tools/lib/firestore/api");
      const raw = loadCJSON(file);
      const api = new FirestoreApi();
      const spec = api.upgradeOldSpec({ indexes: raw.indexes, fieldOverrides: raw.fieldOverrides });
      api.validateSpec(spec);
      return { ok: true, indexes: spec.indexes.length, fieldOverrides: spec.fieldOverrides.length };
    }
    if (kind === "config") {
      const { getValidator, getErrorMessage } = require("firebase-tools/lib/firebaseConfigValidate");
      const check = getValidator();
      if (!check(loadCJSON(file))) {
        throw new Error(check.errors.map(getErrorMessage).join("; "));
      }
      return { ok: true };
    }
    throw new Error(`usage: node validate.js indexes|config FILE, or serve (got ${kind})`);
  } catch (err) {
    return { ok: false, error: String(err.message || err) };
  }
}

const [kind, file] = process.argv.slice(2);
if (kind === "serve") {
  const lines = require("readline").createInterface({ input: process.stdin });
  lines.on("line", (line) => {
    const [asked, path] = line.split("\t");
    console.log(JSON.stringify(validate(asked, path)));
  });
} else {
  const result = validate(kind, file);
  console.log(JSON.stringify(result));
  process.exit(result.ok ? 0 : 1);
}
