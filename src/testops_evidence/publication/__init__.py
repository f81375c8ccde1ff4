"""publication"""
