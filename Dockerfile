FROM python:3.12-slim
COPY . /src
RUN pip install --no-cache-dir '/src[serve,redis]' \
 && useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin metis
COPY examples/gateway.yaml /etc/metis/gateway.yaml
USER 10001
EXPOSE 4000
CMD ["metis", "serve", "--config", "/etc/metis/gateway.yaml", "--host", "0.0.0.0", "--workers", "2"]
