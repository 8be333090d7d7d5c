import FuzzSupport

FuzzEntry.main()
