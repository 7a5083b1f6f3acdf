"""Request batching: group concurrent model runs into batches, as TensorFlow Serving does."""
