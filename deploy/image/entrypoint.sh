#!/bin/sh
# The image's entrypoint, as tensorflow/serving's tf_serving_entrypoint.sh: serves
# ${MODEL_BASE_PATH}/${MODEL_NAME}, with the arguments of `docker run IMAGE ...` appended. A
# --model_config_file among them takes precedence over --model_name/--model_base_path (graphserve,
# as tensorflow_model_server, then ignores those two), and a flag given again overrides these
# (the last one wins). exec: graphserve replaces the shell, so signals reach it directly.
set -e
exec graphserve --port=8500 --rest_api_port=8501 \
    --model_name="${MODEL_NAME}" --model_base_path="${MODEL_BASE_PATH}/${MODEL_NAME}" "$@"
