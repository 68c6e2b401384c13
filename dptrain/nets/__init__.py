"""The networks: which one a run trains (build.py), the built-in one (builtin.py), a --model
(keras_model.py), and the NumPy twin (numpy_net.py)."""
