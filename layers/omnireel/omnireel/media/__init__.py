"""The model containers' wire contracts: image and video requests, the reference image, output checks and the
async notification."""
