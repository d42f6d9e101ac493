"""tensorflow/contrib/ of the 1.x API mode, shipped from tf_contrib/ (data for the tool, never imported by it)."""
