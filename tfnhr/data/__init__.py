"""Data: IAM reading, the embedded synthetic handwriting set, toy digit strings, TFDS builders
and the pixel-budget ``tf.data`` pipeline."""
