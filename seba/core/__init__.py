"""What every stage imports: its command line and warm worker, params.yaml and its schema, the data
paths and tables, the runtime set-up, the errors and the MLflow records. The stages depend on this
directory as one DVC dependency (fewer dependency entries make a no-op ``dvc repro`` faster); a
module belongs here only if every stage that lists the directory imports it
(tests/test_dvc_deps.py)."""
