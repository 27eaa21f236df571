"""Data only, no model yet: tokenizer, splits and batches."""
import torch
import torch.nn as nn
from torch.nn import functional as F

# hyperparameters
batch_size = 32  # how many independent sequences we train on in parallel
block_size = 8  # the longest context the model sees
max_iters = 3000  # training steps
eval_interval = 300  # steps between two loss estimates
learning_rate = 1e-2  # AdamW's step size
device = 'cuda' if torch.cuda.is_available() else 'cpu'
eval_iters = 200  # batches averaged for each estimate
# ------------

torch.manual_seed(1337)

# !wget https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt
with open('input.txt', 'r', encoding='utf-8') as f:
    text = f.read()

# every character that occurs in the text, sorted: the vocabulary
chars = sorted(list(set(text)))
vocab_size = len(chars)
stoi = {ch: i for i, ch in enumerate(chars)}  # character -> integer
itos = {i: ch for i, ch in enumerate(chars)}  # integer -> character


def encode(s):
    """A string as a list of integers."""
    return [stoi[c] for c in s]


def decode(ids):
    """A list of integers as a string."""
    return ''.join(itos[i] for i in ids)


# train and validation splits
data = torch.tensor(encode(text), dtype=torch.long)
n = int(0.9 * len(data))  # the first 90% trains, the rest validates
train_data = data[:n]
val_data = data[n:]


def get_batch(split):
    """A batch of inputs x and of targets y, the same characters shifted by one."""
    data = train_data if split == 'train' else val_data
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i:i + block_size] for i in ix])
    y = torch.stack([data[i + 1:i + block_size + 1] for i in ix])
    x, y = x.to(device), y.to(device)
    return x, y

xb, yb = get_batch('train')
print(xb.shape, yb.shape)
