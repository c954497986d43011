"""Train the bundled LeNet-style digits model, reproducibly, on CPU.

    pip install '.[evaluate]' && python scripts/train_digits.py [--out approxmul_cffi/models/digits_lenet]

Trains on the "train" split of approxmul_cffi.datasets.load_digits with a
fixed seed and single-threaded deterministic PyTorch, then writes the float
model (structure JSON + weights .npz) through approxmul_cffi.nn, with the
float held-out accuracy in its metadata. Needs torch and scikit-learn.
"""

import argparse
import os

import torch
from torch import nn as tnn

from approxmul_cffi import nn
from approxmul_cffi.datasets import load_digits

SEED = 0
EPOCHS = 40
BATCH = 64


class LeNet(tnn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = tnn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = tnn.BatchNorm2d(16)
        self.conv2 = tnn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = tnn.BatchNorm2d(32)
        self.fc1 = tnn.Linear(32 * 2 * 2, 64)
        self.fc2 = tnn.Linear(64, 10)

    def forward(self, x):
        x = tnn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = tnn.functional.max_pool2d(torch.relu(self.bn2(self.conv2(x))), 2)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def to_model(net, accuracy):
    """The same network as an approxmul_cffi.nn.Model (float weights)."""
    p = {k: v.detach().numpy() for k, v in net.state_dict().items()}

    def bn(name, c):
        return nn.BatchNorm2d(c, eps=getattr(net, name).eps, weight=p[f"{name}.weight"],
                              bias=p[f"{name}.bias"], running_mean=p[f"{name}.running_mean"],
                              running_var=p[f"{name}.running_var"])

    return nn.Model((1, 8, 8), [
        ("conv1", nn.Conv2d(1, 16, 3, padding=1, weight=p["conv1.weight"], bias_value=p["conv1.bias"])),
        ("bn1", bn("bn1", 16)),
        ("relu1", nn.ReLU()),
        ("pool1", nn.MaxPool2d(2)),
        ("conv2", nn.Conv2d(16, 32, 3, padding=1, weight=p["conv2.weight"], bias_value=p["conv2.bias"])),
        ("bn2", bn("bn2", 32)),
        ("relu2", nn.ReLU()),
        ("pool2", nn.MaxPool2d(2)),
        ("flatten", nn.Flatten()),
        ("fc1", nn.Linear(128, 64, weight=p["fc1.weight"], bias_value=p["fc1.bias"])),
        ("relu3", nn.ReLU()),
        ("fc2", nn.Linear(64, 10, weight=p["fc2.weight"], bias_value=p["fc2.bias"])),
    ], metadata={
        "description": "LeNet-style CNN for scikit-learn's 8x8 handwritten digits",
        "dataset": "sklearn.datasets.load_digits, approxmul_cffi.datasets split",
        "input": "pixels / 16, float32, shape (N, 1, 8, 8)",
        "trained_by": "scripts/train_digits.py",
        "seed": SEED, "epochs": EPOCHS, "torch": torch.__version__,
        "float_test_accuracy": accuracy,
    })


def fit(make_net, train, test, *, epochs, lr, seed=SEED, batch=BATCH):
    """Seeded, single-threaded, deterministic Adam + cosine training on CPU.

    Returns (net in eval mode, float held-out accuracy). Shared with
    scripts/train_mnist.py.
    """
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    x_train, y_train = (torch.from_numpy(a) for a in train)
    x_test, y_test = test

    net = make_net()
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    gen = torch.Generator().manual_seed(seed)
    for epoch in range(epochs):
        net.train()
        perm = torch.randperm(len(x_train), generator=gen)
        for i in range(0, len(perm), batch):
            idx = perm[i:i + batch]
            loss = tnn.functional.cross_entropy(net(x_train[idx]), y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
    net.eval()
    with torch.no_grad():
        accuracy = float((net(torch.from_numpy(x_test)).argmax(1).numpy() == y_test).mean())
    return net, accuracy


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.normpath(os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "approxmul_cffi", "models", "digits_lenet")))
    args = parser.parse_args()

    x_test, y_test = load_digits("test")
    net, torch_acc = fit(LeNet, load_digits("train"), (x_test, y_test), epochs=EPOCHS, lr=3e-3)
    model = to_model(net, torch_acc)
    numpy_acc = float((model.predict(x_test) == y_test).mean())
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    path = model.save(args.out)
    print(f"float held-out accuracy: torch {torch_acc:.4f}, numpy {numpy_acc:.4f}; wrote {path}")


if __name__ == "__main__":
    main()
