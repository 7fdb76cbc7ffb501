"""Multi-hop retrieval: HotpotQA passage recall and SciFact nDCG@10 per search mode
(`python -m bench.multihop`)."""
