// Validate index files and firebase.json with firebase-tools' own code, offline.
//
//   node validate.js indexes FILE      -> loadCJSON + upgradeOldSpec + validateSpec (what
//                                         `firebase deploy --only firestore:indexes` runs
//                                         before its first network call)
//   node validate.js config FILE       -> firebase.json against the CLI's config schema
//
// Prints one JSON line; exits 0 when valid, 1 with the CLI's own message when not.
"use strict";
const [kind, file] = process.argv.slice(2);
try {
  if (kind === "indexes") {
    const { loadCJSON } = require("firebase-tools/lib/loadCJSON");
    const { FirestoreApi } = require("firebase-tools/lib/firestore/api");
    const raw = loadCJSON(file);
    const api = new FirestoreApi();
    const spec = api.upgradeOldSpec({ indexes: raw.indexes, fieldOverrides: raw.fieldOverrides });
    api.validateSpec(spec);
    console.log(JSON.stringify({ ok: true, indexes: spec.indexes.length, fieldOverrides: spec.fieldOverrides.length }));
  } else if (kind === "config") {
    const { loadCJSON } = require("firebase-tools/lib/loadCJSON");
    const { getValidator, getErrorMessage } = require("firebase-tools/lib/firebaseConfigValidate");
    const validate = getValidator();
    if (!validate(loadCJSON(file))) {
      throw new Error(validate.errors.map(getErrorMessage).join("; "));
    }
    console.log(JSON.stringify({ ok: true }));
  } else {
    throw new Error(`usage: node validate.js indexes|config FILE (got ${kind})`);
  }
} catch (err) {
  console.log(JSON.stringify({ ok: false, error: String(err.message || err) }));
  process.exit(1);
}
