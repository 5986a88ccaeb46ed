# A tiny character-level model that trains on the CPU in seconds (nanoGPT's config files are Python too).
out_dir = "out"
eval_interval = 10
eval_iters = 4
max_iters = 60
batch_size = 16
block_size = 16
n_embd = 32
learning_rate = 1e-2
