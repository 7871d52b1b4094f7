# Sourced by the GPU scripts (gpu_checks.sh, gpu_precision.sh, ablation_round.sh) from the repository
# root: the wheels carried in .whl/ (packages the GPU machine lacks, such as pydantic;
# benchmarks/device_wheels.py) installed into /tmp/site, which goes first on PYTHONPATH
# (SEBA_WHEELS=1 says so). A .whl/ without wheels (a git bundle only) installs nothing.
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "installing .whl/ failed"; exit 1; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} SEBA_WHEELS=1
fi
