"""What the frontend knows of each model it serves: the catalog of names and models from
Triton's repository (`catalog.py`), and what it reads from a model's folder, the tokenizer
(`tokenizers.py`) and the generation config's sampling defaults (`sampling_defaults.py`).
Every API surface that names a model looks it up here."""
