# One image for web, worker and beat (docker-compose.yml picks the command).
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN apt-get update && apt-get install -y --no-install-recommends openssh-client git && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.txt .
# Checkpoint verification needs no GPU on the control side: pass PyTorch's CPU wheel index as
# PIP_EXTRA_INDEX_URL to avoid the multi-GB CUDA build of torch.
ARG PIP_EXTRA_INDEX_URL=""
RUN pip install -r requirements.txt
COPY . .
RUN useradd --create-home remotegpu && mkdir -p /app/var && chown remotegpu /app/var
USER remotegpu
EXPOSE 8000
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "remotegpu_site.asgi:application"]
