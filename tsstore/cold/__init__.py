"""The cold tier: closed partitions of a series sealed into Parquet, exactly once.

Pure rooms the sealing request (:mod:`tsstore.verbs.cold`) stands on: the declaration
(:mod:`~tsstore.cold.tier`: where the objects go, the partition and when one is sealed, and
the partition arithmetic), the manifest that says which object holds each partition and how
it is switched (:mod:`~tsstore.cold.manifest`), the Parquet bytes of a partition
(:mod:`~tsstore.cold.parquet`), and the object stores with the asks a driver answers through
them (:mod:`~tsstore.cold.objects`). Why a partition is sealed once under a kill at any
point and with sealers running at once: ``docs/explanation/cold-tier.md``.
"""
