"""Admission: one fair queue in front of each model endpoint (issue 34). ``pool`` holds the rules (capacity, who is
served next), ``gate`` the use cases (acquire, wait, dispatch, release, heal), ``omnireel.aws.admission_store`` the
table."""
