"""Tiny models the project makes itself: random-weight Llamas with a real tokenizer, real-size
shards, and a trained model whose answers are known."""
