"""EAGLE-3 head training by self-distillation (`specgen-train-draft`, docs/DESIGN.md section 4.1).

- head.py: the head's forward in PyTorch (the engine's, parameters under llama.cpp's tensor names)
- unroll.py: the training-time test (the head unrolled on its own hidden states)
- data.py: the target's continuations of prompts and its hidden states (Generator.hidden_states)
- vocab.py: the reduced draft vocabulary and d2t
- target.py: the target GGUF's geometry and embedding / LM-head rows
- trainer.py: the loss, AdamW, the loop; checkpoint.py: resumable state; export.py: the eagle3 GGUF
- cli.py: the command

Needs the `train` extra (torch, gguf, tqdm; matplotlib for --plot).
"""
