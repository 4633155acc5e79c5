"""Firestore in Datastore mode's wire: values and keys (:mod:`~tsstore.dswire.values`), the
queries built from tsstore's plans (:mod:`~tsstore.dswire.queries`), value filters asked with
Native mode's answers (:mod:`~tsstore.dswire.kinds`), and the one place that calls a
``google.cloud.datastore.Client`` (:mod:`~tsstore.dswire.calls`). Imported only for such a
client: ``google-cloud-datastore`` is the ``datastore`` extra."""
