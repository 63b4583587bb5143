from app import main

print(main())
