module claimstore.dev/claimstore

go 1.26
