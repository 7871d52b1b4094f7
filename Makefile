# Shortcuts; the README gives the plain commands behind each one. The venv is installed once, and
# again when pyproject.toml changes (delete .venv to install it afresh).
VENV := .venv
ACT := . $(VENV)/bin/activate &&

.PHONY: setup repro test ui quick
setup: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV) && $(ACT) pip install -e ".[test]" && touch $@
$(VENV)/.installed-ray: $(VENV)/.installed
	$(ACT) pip install -e ".[test,ray]" && touch $@
repro: setup
	$(ACT) dvc repro
test: $(VENV)/.installed-ray
	$(ACT) pytest
quick: setup
	$(ACT) dvc exp run -S 'datasets=[diabetes,cmc,karhunen]' -S 'ratios=[0.2,0.5]' \
	  -S pretrain.max_epochs=20 -S evaluate.episodes=20
ui: setup
	$(ACT) MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false mlflow ui --backend-store-uri sqlite:///mlflow.db \
	  --host 127.0.0.1 --port 5000 --workers 1
