# Shortcuts; the README gives the plain commands behind each one.
VENV := .venv
ACT := . $(VENV)/bin/activate &&

.PHONY: setup repro test ui quick
setup:
	python3 -m venv $(VENV) && $(ACT) pip install -e ".[test]"
repro: setup
	$(ACT) dvc repro
test: setup
	$(ACT) pip install -e ".[test,ray]" && pytest
quick: setup
	$(ACT) dvc exp run -S 'datasets=[diabetes,cmc,karhunen]' -S 'pretrain.ratios=[0.2,0.5]' \
	  -S pretrain.max_epochs=20 -S evaluate.episodes=20
ui:
	$(ACT) MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false mlflow ui --backend-store-uri sqlite:///mlflow.db \
	  --host 127.0.0.1 --port 5000 --workers 1
