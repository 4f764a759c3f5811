"""Judging projections: metrics, each method's own criterion, held-out evaluation, method
comparison, downstream classifiers and the reports and charts that show them.
"""
