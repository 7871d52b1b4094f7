import torch

from seba.model import Encoder, Projector


def test_encoder_and_projector_shapes_and_conditioning():
    encoder = Encoder(10, 32, 8, out_relu=True)
    h = encoder(torch.randn(5, 10))
    assert h.shape == (5, 8) and (h >= 0).all()
    mask = torch.tensor([True, False] * 5)
    conditioned = Projector(8, 10, 16, 4, conditioned=True)
    assert conditioned.net[0].in_features == 18
    z1 = conditioned(h, mask)
    z2 = conditioned(h, ~mask)
    assert z1.shape == (5, 4) and not torch.allclose(z1, z2)  # the mask changes the embedding
    plain = Projector(8, 10, 16, 4, conditioned=False)
    assert plain.net[0].in_features == 8
    assert torch.equal(plain(h, mask), plain(h, ~mask))
